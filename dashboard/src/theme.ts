/**
 * Light or dark: the system's choice until the user picks one. The choice (not a secret) is kept in
 * localStorage so it survives the tab; keys never are (session.ts).
 */
export type Theme = "light" | "dark";
const SLOT = "sigil.theme";

export function initialTheme(): Theme {
  const saved = localStorage.getItem(SLOT);
  if (saved === "light" || saved === "dark") return saved;
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function applyTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem(SLOT, theme);
}
