import tseslint from "typescript-eslint";

export default tseslint.config(
  // test/executor/compat/actions: third-party actions kept byte-for-byte as published.
  {
    ignores: [
      "node_modules/",
      "artifacts/",
      "cache/",
      "typechain-types/",
      "coverage/",
      "dist/",
      "dashboard/dist/",
      ".sigil/",
      "test/executor/compat/actions/",
    ],
  },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-require-imports": "off",
    },
  },
);
