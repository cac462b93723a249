// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: lit-actions/tests/it.rs (test fn lit_namespace_protection, its code string (indoc! removes the common indentation))
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
"use strict";

const errors = [];
const run = (fn) => { try { fn() } catch(err) { errors.push(err) } };

async function main() {
run(() => delete globalThis.Lit);
run(() => delete globalThis.LitActions);
run(() => delete globalThis.LitHeaders);

run(() => delete Lit.Actions);
run(() => delete Lit.Headers);

run(() => Lit = {});
run(() => LitActions = {});
run(() => LitHeaders = {});

run(() => Lit.Actions = {});
run(() => Lit.Headers = {});

console.log(errors.join('\n'))
}
