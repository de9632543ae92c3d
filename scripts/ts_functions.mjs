// Every TypeScript function's qualified name and length in lines, read with the TypeScript compiler's
// own parser (nothing is run): `node scripts/ts_functions.mjs FILE...` prints {file: {name: lines}}.
// tests/unit/test_house.py holds them to the house limit, as it holds Python's functions (ast).
import { readFileSync } from "node:fs";
import ts from "typescript";

const named = (node) => {
  const name = node.name;
  if (name && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name))) return name.text;
  if (ts.isConstructorDeclaration(node)) return "constructor";
  return null;
};

/** The name a function goes by: its own, or that of what it is assigned to; else "<anonymous>". */
function nameOf(node) {
  const own = named(node);
  if (own) return own;
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return named(parent) ?? "<anonymous>";
  }
  return "<anonymous>";
}

const isFunction = (n) =>
  ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isConstructorDeclaration(n) || ts.isGetAccessorDeclaration(n) ||
  ts.isSetAccessorDeclaration(n) || ts.isFunctionExpression(n) || ts.isArrowFunction(n);

function functions(file) {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const found = {};
  const line = (pos) => source.getLineAndCharacterOfPosition(pos).line;
  const visit = (node, prefix) => {
    let next = prefix;
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) next = `${prefix}${node.name?.text ?? "<class>"}.`;
    else if (isFunction(node)) {
      let name = `${prefix}${nameOf(node)}`;
      for (let i = 2; name in found; i++) name = `${prefix}${nameOf(node)}#${i}`; // overloads, several anonymous
      found[name] = line(node.getEnd()) - line(node.getStart(source)) + 1;
      next = `${name}.`;
    }
    ts.forEachChild(node, (child) => visit(child, next));
  };
  visit(source, "");
  return found;
}

const out = {};
for (const file of process.argv.slice(2)) out[file] = functions(file);
process.stdout.write(JSON.stringify(out));
