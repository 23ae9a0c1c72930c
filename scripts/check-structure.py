#!/usr/bin/env python3
"""Checks the structure of keyer's library (src/): layers and loops between files.

Layers are the folders under src/ (docs/ARCHITECTURE.md). A layer may use itself and the
layers LAYERS lists for it, never a layer above. Checked:

 1. includes: every `#include "x/..."` (and every relative include) of a file under src/
    names a header of its own layer or of a layer it may use;
 2. calls, from the object files of a build (`nm`: strong definitions T/D/B/R against
    undefined U references; a function-pointer table counts as a reference): no file calls
    into a layer it may not use, and no two files under src/ call each other in a loop,
    directly or through other files (each loop is printed);
 3. compile definitions (when CMake passes --def): a file that tests KEYER_HAVE_x in a
    preprocessor line belongs to a layer that the build gives KEYER_HAVE_x, so that a
    feature cannot silently compile out;
 4. for information: files under src/ longer than 1000 lines.

Temporary exceptions to the loop check are listed in LOOP_EXCEPTIONS, each with the reason
and who removes it; a warning is printed for each one that is used, and for each one that is
no longer needed (remove it then).

Usage: scripts/check-structure.py [--src DIR] [--build DIR | --objects FILE] [--nm NM]
                                  [--layers TABLE] [--def NAME=LAYER,...]...
With neither --build nor --objects, only the source checks (1, 3, 4) run. ctest runs it after
the build (test check_structure) with the build's object list. Exit status 0 when every
check passes, 1 otherwise. Python 3 standard library only.
"""
import argparse
import os
import re
import subprocess
import sys

# Each layer and the layers it may use (besides itself). Keep in step with KEYER_LAYERS and
# KEYER_LAYER_DEPS_* in CMakeLists.txt (ctest passes CMake's table with --layers and this
# script fails when the two differ).
LAYERS = {
    "core": [],
    "nn": ["core"],
    "io": ["core"],
    "render": ["core", "nn", "io"],
    "overlay": ["core", "nn", "io"],
    "vision": ["core", "nn", "io", "render", "overlay"],
    "pipeline": ["core", "nn", "io", "render", "overlay", "vision"],
}

# Loops between files that are being removed. A strongly connected set of files that lies
# inside one of these sets passes with a warning. Remove an entry as soon as its loop is gone.
LOOP_EXCEPTIONS = [
]

SOURCE_EXTS = (".c", ".h", ".cu", ".cuh")
LONG_FILE_LINES = 1000
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
PP_DEF_RE = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b.*")


def rel(path, root):
    return os.path.relpath(path, root).replace(os.sep, "/")


def layer_of(relpath):
    """'src/<layer>/...' -> layer, else None."""
    parts = relpath.split("/")
    if len(parts) >= 3 and parts[0] == "src":
        return parts[1]
    return None


def may_use(layer, other):
    return other == layer or other in LAYERS.get(layer, [])


def source_files(src_dir, root):
    files = []
    for dirpath, dirnames, filenames in os.walk(src_dir):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXTS):
                files.append(rel(os.path.join(dirpath, name), root))
    return files


def parse_layers(text):
    """'core= nn=core render=core,nn,io' (or ';' between layers) -> dict."""
    table = {}
    for item in text.replace(";", " ").split():
        if not item.strip():
            continue
        name, _, deps = item.partition("=")
        table[name.strip()] = [d for d in deps.split(",") if d.strip()]
    return table


def check_layer_table(cmake_table, errors):
    if cmake_table is None:
        return
    mine = {k: sorted(v) for k, v in LAYERS.items()}
    theirs = {k: sorted(v) for k, v in cmake_table.items()}
    for name in sorted(set(mine) | set(theirs)):
        if mine.get(name) != theirs.get(name):
            errors.append(
                "layer table: CMakeLists.txt has %s -> %s, scripts/check-structure.py has %s -> %s;"
                " keep the two in step"
                % (name, theirs.get(name, "(none)"), name, mine.get(name, "(none)"))
            )


def check_folders(src_dir, errors):
    for name in sorted(os.listdir(src_dir)):
        if os.path.isdir(os.path.join(src_dir, name)) and name not in LAYERS:
            errors.append("src/%s is not a layer: add it to LAYERS (and to CMakeLists.txt)" % name)


def check_includes(files, root, errors):
    checked = 0
    for f in files:
        layer = layer_of(f)
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                first = inc.split("/")[0]
                if first == "keyer":
                    continue  # the public API (include/keyer/)
                if first in LAYERS:
                    target = first
                    shown = inc
                else:  # relative to the including file
                    resolved = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                    resolved = resolved.replace(os.sep, "/")
                    target = layer_of(resolved)
                    shown = resolved
                    if target is None:
                        errors.append(
                            '%s:%d: #include "%s" leaves src/' % (f, lineno, inc)
                        )
                        continue
                checked += 1
                if not may_use(layer, target):
                    errors.append(
                        '%s:%d: #include "%s": layer %s may not use layer %s (it may use: %s)'
                        % (f, lineno, shown, layer, target, ", ".join(LAYERS[layer]) or "none")
                    )
    return checked


def check_definitions(files, root, defs, errors):
    """defs: {macro: set(layers)}; a file testing a macro must be in one of its layers."""
    if not defs:
        return
    words = {m: re.compile(r"\b%s\b" % re.escape(m)) for m in defs}
    for f in files:
        layer = layer_of(f)
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not PP_DEF_RE.match(line):
                    continue
                for macro, rx in words.items():
                    if rx.search(line) and layer not in defs[macro]:
                        errors.append(
                            "%s:%d: tests %s, which the build defines only for layers %s "
                            "(CMakeLists.txt, KEYER_DEF_LAYERS_%s)"
                            % (f, lineno, macro, ", ".join(sorted(defs[macro])), macro)
                        )


def report_long_files(files, root):
    longest = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > LONG_FILE_LINES:
            longest.append((n, f))
    for n, f in sorted(longest, reverse=True):
        print("info: %s has %d lines (over %d)" % (f, n, LONG_FILE_LINES))


# ---- the call graph from object files ------------------------------------------------------


def object_source(obj, root):
    """build/.../keyer_nn.dir/src/nn/graph.c.o -> src/nn/graph.c (if that source exists)."""
    path = obj.replace(os.sep, "/")
    i = path.rfind("/src/")
    if i < 0 or not path.endswith(".o"):
        return None
    src = path[i + 1 : -2]
    if not src.endswith((".c", ".cu")) or not os.path.isfile(os.path.join(root, src)):
        return None  # not a library source, or a stale object of a removed file
    return src


def find_objects(build_dir, root):
    """The library's object files under a build folder, one per source: the newest where an
    older build layout left another (a stale object would report calls that are gone)."""
    newest = {}
    for dirpath, dirnames, filenames in os.walk(build_dir):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            if not name.endswith(".o") or "/CMakeFiles/keyer_" not in p.replace(os.sep, "/"):
                continue
            src = object_source(p, root)
            if src and (src not in newest or os.path.getmtime(p) > os.path.getmtime(newest[src])):
                newest[src] = p
    return [newest[k] for k in sorted(newest)]


def read_symbols(nm, objects):
    """{object: (defined, undefined)} with nm -A (one run per batch of objects)."""
    table = {o: (set(), set()) for o in objects}
    batch = 200
    for i in range(0, len(objects), batch):
        part = objects[i : i + batch]
        run = subprocess.run([nm, "-A"] + part, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError("%s -A failed: %s" % (nm, run.stderr.strip()[:500]))
        out = run.stdout
        for line in out.splitlines():
            # "<object>:<address> <type> <name>" or "<object>:                 U <name>"
            obj, _, rest = line.partition(":")
            if obj not in table:
                continue
            fields = rest.split()
            if len(fields) == 2:
                kind, name = fields
            elif len(fields) == 3:
                kind, name = fields[1], fields[2]
            else:
                continue
            defined, undefined = table[obj]
            if kind == "U":
                undefined.add(name)
            elif kind in "TDBRGS":  # strong, global definitions (weak W/V ones are shared)
                defined.add(name)
    return table


def build_graph(objects, root, nm):
    symbols = read_symbols(nm, objects)
    owner = {}
    for obj, (defined, _) in symbols.items():
        src = object_source(obj, root)
        for name in defined:
            owner.setdefault(name, src)
    graph = {}
    for obj, (_, undefined) in symbols.items():
        src = object_source(obj, root)
        edges = graph.setdefault(src, {})
        for name in undefined:
            target = owner.get(name)
            if target and target != src:
                edges.setdefault(target, set()).add(name)
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative. Returns the components with more than one file."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def one_cycle(graph, comp):
    """A shortest loop through the first file of a strongly connected component."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path.reverse()
                return path + [start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return comp + [start]


def format_cycle(graph, cycle):
    parts = [cycle[0]]
    for a, b in zip(cycle, cycle[1:]):
        names = sorted(graph[a][b])
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        parts.append("  -> %s  (%s)" % (b, shown))
    return "\n".join(parts)


def check_calls(graph, root, errors, warnings):
    for src in sorted(graph):
        layer = layer_of(src)
        for target in sorted(graph[src]):
            other = layer_of(target)
            if not may_use(layer, other):
                names = sorted(graph[src][target])
                errors.append(
                    "%s calls %s (%s): layer %s may not use layer %s"
                    % (src, target, ", ".join(names[:3]), layer, other)
                )
    used = set()
    for comp in strongly_connected(graph):
        cycle = format_cycle(graph, one_cycle(graph, comp))
        allowed = [i for i, (_, files) in enumerate(LOOP_EXCEPTIONS) if set(comp) <= files]
        if allowed:
            used.add(allowed[0])
            warnings.append(
                "loop between %d files, allowed by a temporary exception: %s\n%s"
                % (len(comp), LOOP_EXCEPTIONS[allowed[0]][0], cycle)
            )
        else:
            errors.append(
                "loop between files (%s):\n%s" % (", ".join(comp), cycle)
            )
    for i, (reason, files) in enumerate(LOOP_EXCEPTIONS):
        if i in used:
            continue
        if not all(f in graph for f in files if os.path.isfile(os.path.join(root, f))):
            continue  # some of its files are not in this build (CUDA code in a CPU build)
        warnings.append("loop exception no longer needed, remove it: %s" % reason)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "src"), help="src/ folder")
    ap.add_argument("--build", help="build folder whose object files give the call graph")
    ap.add_argument("--objects", help="file listing the library's object files, one a line")
    ap.add_argument("--nm", default="nm", help="nm program (default: nm)")
    ap.add_argument("--layers", help="CMake's layer table, 'core= nn=core ...', checked against LAYERS")
    ap.add_argument("--def", dest="defs", action="append", default=[],
                    help="NAME=LAYER,LAYER: the build defines NAME for these layers only")
    args = ap.parse_args()

    src_dir = os.path.abspath(args.src)
    root = os.path.dirname(src_dir)
    errors, warnings = [], []

    check_layer_table(parse_layers(args.layers) if args.layers else None, errors)
    check_folders(src_dir, errors)
    files = source_files(src_dir, root)
    n_includes = check_includes(files, root, errors)
    defs = {}
    for d in args.defs:
        name, _, layers = d.partition("=")
        defs[name] = {x for x in layers.split(",") if x}
    check_definitions(files, root, defs, errors)

    graph = None
    if args.objects or args.build:
        if args.objects:
            with open(args.objects, encoding="utf-8") as fh:
                objects = [l.strip() for l in fh if l.strip()]
            objects = [o for o in objects if object_source(o, root)]
        else:
            objects = find_objects(os.path.abspath(args.build), root)
        missing = [o for o in objects if not os.path.isfile(o)]
        if missing:
            errors.append("object files missing (build first): %s" % ", ".join(missing[:5]))
            objects = [o for o in objects if os.path.isfile(o)]
        if not objects:
            errors.append("no object files of src/ found: build the library first")
        else:
            try:
                graph = build_graph(objects, root, args.nm)
            except (OSError, RuntimeError) as e:
                errors.append("reading the object files' symbols: %s" % e)
            else:
                check_calls(graph, root, errors, warnings)

    report_long_files(files, root)
    for w in warnings:
        print("warning: " + w)
    for e in errors:
        print("error: " + e)
    summary = "%d files, %d layer includes" % (len(files), n_includes)
    if graph is not None:
        summary += ", %d objects, %d calls between files" % (
            len(graph), sum(len(v) for v in graph.values()))
    if errors:
        print("check-structure: FAILED (%d errors; %s)" % (len(errors), summary))
        return 1
    print("check-structure: ok (%s)" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
