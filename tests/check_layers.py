#!/usr/bin/env python3
"""Fails if a ymlopt CMake target links a target of a higher layer.

    tests/check_layers.py --build-dir BUILD   # runs `cmake --graphviz` on BUILD
    tests/check_layers.py --dot FILE          # checks a graph cmake --graphviz wrote

The links are read from CMake's own graph of the configured build (every
target_link_libraries edge, PUBLIC, PRIVATE and INTERFACE alike). A target may
link targets of lower layers and the other targets of its own unit (a family
and its CUDA part, the CLI library and the executable); any other edge fails,
unless EXCEPTIONS lists it with its reason. Test, benchmark, fuzz and plugin
targets sit above every layer and are not checked. A new ymlopt library must be
given a layer here.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Bottom to top: (layer, {unit: [targets]}).
LAYERS = [
    # onednn, clblast: the imported oneDNN and CLBlast libraries
    ("sdk", {"sdk": ["ymlopt_sdk"], "onednn": ["ymlopt_onednn"], "clblast": ["ymlopt_clblast"]}),
    # shared kernels the families call; they register no components
    # (opencl: the OpenCL devices and the per-device program cache of the OpenCL kernels)
    ("kernel libraries", {"gemm": ["ymlopt_gemm"], "cuda_libs": ["ymlopt_cuda_libs"], "opencl": ["ymlopt_opencl"]}),
    # the co-method runtime (board, exchange, exit policies, rank-group interface):
    # knows no DAG; the eigen family, the scheduler and the MPI backend drive it
    ("unite", {"unite": ["ymlopt_unite"]}),
    # families whose kernels nn.linear / nn.embedding run on compressed weights
    ("weight formats", {
        "quant": ["ymlopt_quant", "ymlopt_quant_cuda"],
        "sparse": ["ymlopt_sparse", "ymlopt_sparse_cuda"],
    }),
    # the transformer building blocks (their CUDA part holds the cuBLAS GEMM blas.gemm reuses)
    ("nn", {"nn": ["ymlopt_nn", "ymlopt_nn_cuda"]}),
    ("component families", {
        "blas": ["ymlopt_blas"],
        "tensor": ["ymlopt_tensor"],
        "io": ["ymlopt_io"],
        "text": ["ymlopt_text"],
        "prune": ["ymlopt_prune"],
        "eigen": ["ymlopt_eigen"],
        "op": ["ymlopt_op"],
    }),
    ("component registry", {"components": ["ymlopt_components"]}),
    ("xml", {"xml": ["ymlopt_xml"]}),
    ("engine", {"engine": ["ymlopt_engine"]}),
    ("scheduler", {"scheduler": ["ymlopt_scheduler"]}),
    ("backends", {
        "sequential": ["ymlopt_backend_sequential"],
        "starpu": ["ymlopt_backend_starpu"],
    }),
    # one process per rank, on the StarPU backend's codelets and bindings
    ("multi-process backend", {"starpu_mpi": ["ymlopt_backend_starpu_mpi"]}),
    ("backend factory", {"backends": ["ymlopt_backends"]}),  # make_executor: a backend by name
    ("optimizer", {"optimizer": ["ymlopt_optimizer"]}),
    ("cli", {"cli": ["ymlopt_cli", "ymlopt"]}),
]

# The edges that climb (or cross between units of one layer), each with its
# reason; none today.
EXCEPTIONS = {}

# Targets above every layer: tests, benchmarks, fuzzers, plugins.
UNCHECKED = re.compile(r"^(ymlopt_(test|bench|fuzz)_.*|ymlopt_example_ops|.*_plugin)$")


def classify():
    where = {}
    for rank, (layer, units) in enumerate(LAYERS):
        for unit, targets in units.items():
            for t in targets:
                where[t] = (rank, layer, unit)
    return where


def read_graph(path):
    """(node names, edges) of a cmake --graphviz file."""
    names, edges = {}, []
    node = re.compile(r'^\s*"(node\d+)" \[ label = "([^"]*)"')
    edge = re.compile(r'^\s*"(node\d+)" -> "(node\d+)"')
    with open(path) as f:
        for line in f:
            if m := node.match(line):
                names[m.group(1)] = m.group(2).split("\\n")[0]
            elif m := edge.match(line):
                edges.append((m.group(1), m.group(2)))
    return [(names[a], names[b]) for a, b in edges]


def graph_of(build_dir, tmp):
    dot = os.path.join(tmp, "targets.dot")
    r = subprocess.run(["cmake", f"--graphviz={dot}", build_dir], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(dot):
        sys.exit(f"check_layers: cmake --graphviz on {build_dir} failed:\n{r.stdout}{r.stderr}")
    return read_graph(dot)


def check(links):
    where = classify()
    errors, seen = [], set()
    for a, b in links:
        for t in (a, b):
            if t.startswith("ymlopt") and t not in where and not UNCHECKED.match(t):
                errors.append(f"{t}: a ymlopt target with no layer (give it one in tests/check_layers.py)")
        if a not in where or b not in where:
            continue  # tests and external libraries
        (ra, la, ua), (rb, lb, ub) = where[a], where[b]
        if ua == ub or rb < ra:
            continue
        if (a, b) in EXCEPTIONS:
            seen.add((a, b))
            continue
        how = "a higher layer" if rb > ra else "another unit of its layer"
        errors.append(f"{a} ({la}) links {b} ({lb}): {how}")
    for (a, b), why in EXCEPTIONS.items():
        state = "allowed" if (a, b) in seen else "not in this build"
        print(f"check_layers: exception {a} -> {b} ({state}): {why}")
    for e in sorted(set(errors)):
        print(f"check_layers: {e}", file=sys.stderr)
    return not errors


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--build-dir", help="a configured ymlopt build directory")
    g.add_argument("--dot", help="a graph written by cmake --graphviz")
    args = p.parse_args()
    if args.dot:
        links = read_graph(args.dot)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            links = graph_of(os.path.abspath(args.build_dir), tmp)
    if not links:
        sys.exit("check_layers: no links in the graph")
    if not check(links):
        sys.exit(1)
    print(f"check_layers: {len(links)} links, none climbs")


if __name__ == "__main__":
    main()
