/**
 * Which source files a call path enters: from one entry function, every
 * function it calls, and every function those call, as the TypeScript type
 * checker resolves each call (methods through the declared type of their
 * receiver: a call on an interface lands on the interface's declaration,
 * which has no body to follow).
 *
 * A call is a call or `new` expression, or a function or method of the
 * project passed as an argument (`steps.map(asLoopStep)`). Only the
 * project's own files are followed (never node_modules or .d.ts files).
 * Calls inside a function's nested callbacks count as the function's.
 *
 * The depth of a function is the number of calls between files on the way
 * to it: a call within one file keeps the depth, a call into another file
 * adds one. `maxDepth` keeps the functions up to that depth (the entry is
 * at 0); without it, the whole path is followed.
 *
 * Used by test/runs/approval-path.test.ts; also a command line tool:
 *   node -r ./test/support/register-ts.js test/support/path-files.ts src/runs/run.resolver.ts RunResolver.resolveToolApproval [maxDepth]
 */
import path from 'node:path';
import ts from 'typescript';

export interface PathReport {
  /** `file:Class.method` of every function on the path, the entry first. */
  functions: string[];
  /** Every file holding a function on the path (repository-relative, sorted), the entry's included. */
  files: string[];
  /** Calls between two functions of different files (each caller–callee pair once). */
  hops: number;
}

export interface PathOptions {
  /** The repository root (holds tsconfig.json). */
  root: string;
  /** Repository-relative file of the entry function. */
  file: string;
  /** `Class.method` or a function's name. */
  entry: string;
  /** Keep only functions at most this many calls between files away from the entry. */
  maxDepth?: number;
}

type FunctionNode = ts.FunctionLikeDeclaration | ts.MethodSignature | ts.ClassDeclaration;

const programs: Array<{ root: string; program: ts.Program }> = [];

/** A program holding `file` (its imports pulled in): one made for an earlier entry when it has the file, else a new one. */
function programFor(root: string, file: string): ts.Program {
  const wanted = path.join(root, file);
  const known = programs.find((made) => made.root === root && made.program.getSourceFile(wanted));
  if (known) return known.program;
  const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), (name) => ts.sys.readFile(name));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const program = ts.createProgram({ rootNames: [wanted], options: { ...parsed.options, noEmit: true }, host: ts.createCompilerHost(parsed.options) });
  programs.push({ root, program });
  return program;
}

export function pathFiles(options: PathOptions): PathReport {
  const { root } = options;
  const program = programFor(root, options.file);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(path.join(root, options.file));
  if (!source) throw new Error(`${options.file} is not in the program`);
  const entry = findFunction(source, options.entry);
  if (!entry) throw new Error(`no function ${options.entry} in ${options.file}`);

  const own = (node: ts.Node): boolean => {
    const file = node.getSourceFile();
    return !file.isDeclarationFile && !file.fileName.includes(`${path.sep}node_modules${path.sep}`) && file.fileName.startsWith(root);
  };
  const fileOf = (node: ts.Node) => path.relative(root, node.getSourceFile().fileName);
  const maxDepth = options.maxDepth ?? Infinity;

  const depth = new Map<FunctionNode, number>([[entry, 0]]);
  const edges = new Set<string>();
  const queue: FunctionNode[] = [entry];
  // Breadth first by depth: a function is kept at the smallest depth it is reached with.
  while (queue.length > 0) {
    queue.sort((a, b) => depth.get(a)! - depth.get(b)!);
    const caller = queue.shift()!;
    const callerDepth = depth.get(caller)!;
    for (const callee of calleesOf(caller, checker)) {
      if (!own(callee)) continue;
      const crosses = fileOf(callee) !== fileOf(caller);
      const calleeDepth = callerDepth + (crosses ? 1 : 0);
      if (calleeDepth > maxDepth) continue;
      if (crosses) edges.add(`${nameOf(caller)}\0${nameOf(callee)}`);
      const known = depth.get(callee);
      if (known !== undefined && known <= calleeDepth) continue;
      depth.set(callee, calleeDepth);
      queue.push(callee);
    }
  }
  const functions = [...depth.keys()].map((fn) => `${fileOf(fn)}:${nameOf(fn)}`);
  const files = [...new Set([...depth.keys()].map(fileOf))].sort();
  return { functions, files, hops: edges.size };
}

/** The declarations a function's body calls (see the header for what counts as a call). */
function calleesOf(fn: FunctionNode, checker: ts.TypeChecker): Set<FunctionNode> {
  const found = new Set<FunctionNode>();
  if (ts.isClassDeclaration(fn) || ts.isMethodSignature(fn) || !fn.body) return found;
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const declaration = calledDeclaration(node, checker);
      if (declaration) found.add(declaration);
      for (const argument of node.arguments ?? []) {
        if (ts.isIdentifier(argument) || ts.isPropertyAccessExpression(argument)) {
          const passed = functionOfSymbol(checker.getSymbolAtLocation(argument), checker);
          if (passed) found.add(passed);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  ts.forEachChild(fn.body, visit);
  return found;
}

function calledDeclaration(node: ts.CallExpression | ts.NewExpression, checker: ts.TypeChecker): FunctionNode | null {
  const declaration = checker.getResolvedSignature(node)?.declaration;
  if (declaration && isFunctionNode(declaration)) return declaration;
  // `new X()` of a class without a constructor of its own: the class.
  return functionOfSymbol(checker.getSymbolAtLocation(node.expression), checker);
}

function functionOfSymbol(symbol: ts.Symbol | undefined, checker: ts.TypeChecker): FunctionNode | null {
  if (!symbol) return null;
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  for (const declaration of target.declarations ?? []) {
    if (isFunctionNode(declaration)) return declaration;
    if (ts.isVariableDeclaration(declaration) && declaration.initializer && (ts.isArrowFunction(declaration.initializer) || ts.isFunctionExpression(declaration.initializer))) {
      return declaration.initializer;
    }
    if (ts.isClassDeclaration(declaration)) return declaration;
  }
  return null;
}

function isFunctionNode(node: ts.Node): node is FunctionNode {
  return ts.isFunctionLike(node) && (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node) || ts.isMethodSignature(node));
}

function nameOf(fn: FunctionNode): string {
  if (ts.isClassDeclaration(fn)) return fn.name?.text ?? '(class)';
  const own = fn.name && (ts.isIdentifier(fn.name) || ts.isPrivateIdentifier(fn.name)) ? fn.name.text : ts.isConstructorDeclaration(fn) ? 'constructor' : null;
  const holder = fn.parent;
  if ((ts.isClassDeclaration(holder) || ts.isInterfaceDeclaration(holder)) && holder.name) return `${holder.name.text}.${own ?? '?'}`;
  if (own) return own;
  if (ts.isVariableDeclaration(holder) && ts.isIdentifier(holder.name)) return holder.name.text;
  return `(function at ${fn.getSourceFile().getLineAndCharacterOfPosition(fn.getStart()).line + 1})`;
}

function findFunction(source: ts.SourceFile, name: string): FunctionNode | null {
  const [first, second] = name.split('.');
  let found: FunctionNode | null = null;
  const visit = (node: ts.Node): void => {
    if (found) return;
    if (second === undefined && ts.isFunctionDeclaration(node) && node.name?.text === first) found = node;
    if (second === undefined && ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === first && node.initializer && ts.isArrowFunction(node.initializer)) found = node.initializer;
    if (second !== undefined && ts.isClassDeclaration(node) && node.name?.text === first) {
      for (const member of node.members) {
        if (ts.isMethodDeclaration(member) && ts.isIdentifier(member.name) && member.name.text === second) found = member;
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

if (require.main === module) {
  const [file, entry, depthArgument] = process.argv.slice(2);
  if (!file || !entry) {
    console.error('usage: path-files <file> <Class.method|function> [maxDepth]');
    process.exit(2);
  }
  const report = pathFiles({ root: path.resolve(__dirname, '../..'), file, entry, ...(depthArgument ? { maxDepth: Number(depthArgument) } : {}) });
  const inRuns = report.files.filter((name) => name.startsWith(`src${path.sep}runs${path.sep}`));
  console.log(`${report.functions.length} functions, ${report.hops} hops, ${report.files.length} files (${inRuns.length} in src/runs)`);
  for (const name of report.files) console.log(`  ${name}`);
}
