import tseslint from "typescript-eslint";

export default tseslint.config(
  // test/executor/compat/actions: sandbox actions in the reference runtime's style (its globals; two are
  // deliberate syntax errors), run by compat.test.ts, not modules of this code base.
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
