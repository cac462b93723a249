/**
 * Turns ES module text into code the worker can run in the run's own Compartment (SES's module loader
 * needs @endo/module-source, which is not part of this build; this is the "pre-bundling" alternative).
 *
 * A module becomes `(async function (__sigil_import, __sigil_export) { … })`: its import declarations
 * become constants read from the namespaces of its dependencies (evaluated first), its exports become
 * getters on its namespace (so they stay live), and its body is otherwise unchanged (the same lines, so
 * stack traces point at the module's own line numbers). The action's imports become constants read from
 * `arguments[2]` of the action's wrapper function.
 *
 * Refused: `import.meta`, and cycles between modules (loader.ts). `import(` is refused by SES itself.
 */
import * as acorn from "acorn";
import { ModuleError } from "./errors";

export interface ModuleImports {
  /** Every distinct specifier the code imports or re-exports from, in order of appearance. */
  specifiers: string[];
}

export interface TransformedModule extends ModuleImports {
  /** A function expression: (importNamespace(index), defineExport(name, getter)). */
  functionSource: string;
}

export interface TransformedAction extends ModuleImports {
  /** The action's code with its import declarations replaced (same line numbers). */
  code: string;
}

type Node = acorn.Node & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Edit {
  start: number;
  end: number;
  text: string;
}

/** A cheap test first: code without the word `import` is never parsed here (the warm path). */
export function mayImport(code: string): boolean {
  return /\bimport\b/.test(code);
}

/** Recent actions, transformed (or null): a warm run of the same code does not parse it again. */
const actionCache = new Map<string, TransformedAction | null>();
const ACTION_CACHE_ENTRIES = 200;

/** Null when the action has no import declaration (or does not parse: the worker reports that). */
export function transformAction(code: string): TransformedAction | null {
  if (actionCache.has(code)) return actionCache.get(code)!;
  const result = transformActionUncached(code); // a refusal (import.meta) throws and is not cached
  actionCache.set(code, result);
  if (actionCache.size > ACTION_CACHE_ENTRIES) actionCache.delete(actionCache.keys().next().value!);
  return result;
}

function transformActionUncached(code: string): TransformedAction | null {
  let program: Node;
  try {
    program = acorn.parse(code, {
      ecmaVersion: "latest",
      sourceType: "module",
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
    }) as Node;
  } catch {
    return null;
  }
  const imports = program.body.filter((n: Node) => n.type === "ImportDeclaration");
  if (imports.length === 0) return null;
  refuseImportMeta(program, "the action");
  const specifiers: string[] = [];
  const prelude: string[] = ["const __sigil_imports = arguments[2];"];
  const edits: Edit[] = [];
  for (const node of imports) {
    const index = indexOf(specifiers, node.source.value);
    prelude.push(bindingsOf(node, `__sigil_imports[${index}]`));
    edits.push({ start: node.start, end: node.end, text: blankKeepingLines(code, node.start, node.end) });
  }
  return { specifiers, code: prelude.join(" ") + applyEdits(code, edits) };
}

export function transformModule(source: string, url: string): TransformedModule {
  let program: Node;
  try {
    program = acorn.parse(source, { ecmaVersion: "latest", sourceType: "module" }) as Node;
  } catch (e) {
    throw new ModuleError(
      "import_invalid",
      `module ${url} does not parse as an ES module: ${(e as Error).message}`,
    );
  }
  refuseImportMeta(program, `module ${url}`);
  const specifiers: string[] = [];
  const top: string[] = [];
  const stars: string[] = [];
  const edits: Edit[] = [];
  const exportGetter = (name: string, expr: string) =>
    top.push(`__sigil_export(${JSON.stringify(name)}, () => ${expr});`);
  for (const node of program.body as Node[]) {
    switch (node.type) {
      case "ImportDeclaration": {
        const index = indexOf(specifiers, node.source.value);
        top.push(bindingsOf(node, `__sigil_import(${index})`));
        edits.push({
          start: node.start,
          end: node.end,
          text: blankKeepingLines(source, node.start, node.end),
        });
        break;
      }
      case "ExportNamedDeclaration": {
        if (node.declaration) {
          for (const name of declaredNames(node.declaration)) exportGetter(name, name);
          edits.push({ start: node.start, end: node.declaration.start, text: "" });
        } else if (node.source) {
          const ns = `__sigil_import(${indexOf(specifiers, node.source.value)})`;
          for (const s of node.specifiers)
            exportGetter(nameOf(s.exported), `${ns}[${JSON.stringify(nameOf(s.local))}]`);
          edits.push({
            start: node.start,
            end: node.end,
            text: blankKeepingLines(source, node.start, node.end),
          });
        } else {
          for (const s of node.specifiers) exportGetter(nameOf(s.exported), nameOf(s.local));
          edits.push({
            start: node.start,
            end: node.end,
            text: blankKeepingLines(source, node.start, node.end),
          });
        }
        break;
      }
      case "ExportDefaultDeclaration": {
        const d = node.declaration;
        if ((d.type === "FunctionDeclaration" || d.type === "ClassDeclaration") && d.id) {
          exportGetter("default", d.id.name);
          edits.push({ start: node.start, end: d.start, text: "" });
        } else {
          exportGetter("default", "__sigil_default");
          edits.push({ start: node.start, end: d.start, text: "const __sigil_default = (" });
          edits.push({ start: d.end, end: node.end, text: ");" });
        }
        break;
      }
      case "ExportAllDeclaration": {
        const ns = `__sigil_import(${indexOf(specifiers, node.source.value)})`;
        if (node.exported) exportGetter(nameOf(node.exported), ns);
        else stars.push(ns);
        edits.push({
          start: node.start,
          end: node.end,
          text: blankKeepingLines(source, node.start, node.end),
        });
        break;
      }
    }
  }
  // `export *` never overrides an explicit export (defineExport skips names already defined).
  for (const ns of stars)
    top.push(
      `for (const k of Object.keys(${ns})) if (k !== "default") __sigil_export(k, () => ${ns}[k], true);`,
    );
  const body = applyEdits(source, edits);
  return {
    specifiers,
    functionSource: `(async function (__sigil_import, __sigil_export) { "use strict"; ${top.join(" ")}\n${body}\n})`,
  };
}

function refuseImportMeta(program: Node, where: string): void {
  let found = false;
  const visit = (n: unknown): void => {
    if (found || n === null || typeof n !== "object") return;
    if (Array.isArray(n)) return n.forEach(visit);
    const node = n as Node;
    if (node.type === "MetaProperty" && node.meta?.name === "import") {
      found = true;
      return;
    }
    for (const key of Object.keys(node)) if (key !== "type") visit(node[key]);
  };
  visit(program);
  if (found) throw new ModuleError("import_invalid", `${where} uses import.meta, which actions do not have`);
}

function indexOf(list: string[], value: string): number {
  const i = list.indexOf(value);
  if (i >= 0) return i;
  list.push(value);
  return list.length - 1;
}

/** `import d, { a, b as c } from …` → `const { default: d, a: a, b: c } = ns;`; `* as n` → `const n = ns;`. */
function bindingsOf(node: Node, ns: string): string {
  const parts: string[] = [];
  let namespace: string | null = null;
  for (const s of node.specifiers as Node[]) {
    if (s.type === "ImportNamespaceSpecifier") namespace = s.local.name;
    else if (s.type === "ImportDefaultSpecifier") parts.push(`default: ${s.local.name}`);
    else parts.push(`${JSON.stringify(nameOf(s.imported))}: ${s.local.name}`);
  }
  const out: string[] = [];
  if (namespace !== null) out.push(`const ${namespace} = ${ns};`);
  if (parts.length > 0) out.push(`const { ${parts.join(", ")} } = ${ns};`);
  if (out.length === 0) out.push(`${ns};`);
  return out.join(" ");
}

function nameOf(n: Node): string {
  return n.type === "Literal" ? String(n.value) : n.name;
}

function declaredNames(decl: Node): string[] {
  if (decl.type === "FunctionDeclaration" || decl.type === "ClassDeclaration") return [decl.id.name];
  const names: string[] = [];
  const collect = (p: Node | null): void => {
    if (p === null) return;
    switch (p.type) {
      case "Identifier":
        names.push(p.name);
        break;
      case "ObjectPattern":
        for (const prop of p.properties) collect(prop.type === "RestElement" ? prop.argument : prop.value);
        break;
      case "ArrayPattern":
        for (const el of p.elements) collect(el);
        break;
      case "RestElement":
        collect(p.argument);
        break;
      case "AssignmentPattern":
        collect(p.left);
        break;
    }
  };
  for (const d of decl.declarations) collect(d.id);
  return names;
}

function blankKeepingLines(text: string, start: number, end: number): string {
  return text.slice(start, end).replace(/[^\n]/g, " ");
}

function applyEdits(text: string, edits: Edit[]): string {
  const sorted = [...edits].sort((a, b) => a.start - b.start);
  let out = "";
  let at = 0;
  for (const e of sorted) {
    out += text.slice(at, e.start) + e.text;
    at = e.end;
  }
  return out + text.slice(at);
}
