# -*- Python -*-
# lit configuration of gptc's regression tests (`ninja check-gptc`).

import os
import shutil
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "GPTC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".pbtxt", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gptc_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%gptc_src_root", config.gptc_src_root))
config.substitutions.append(("%gptc_obj_root", config.gptc_obj_root))
config.substitutions.append(("%models", os.path.join(config.gptc_src_root, "models")))
config.substitutions.append(("%gptc_bin", os.path.join(config.gptc_tools_dir, "gptc")))
config.substitutions.append(("%gptc_opt_bin", os.path.join(config.gptc_tools_dir, "gptc-opt")))
config.substitutions.append(("%gptc_run_bin", os.path.join(config.gptc_tools_dir, "gptc-run")))
config.substitutions.append(("%gptc_plugin", os.path.join(config.gptc_obj_root, "lib", "GptcPlugin.so")))
# ONNX models written as protobuf text in the tests, encoded with protoc
# against the installed onnx.proto; ONNX's own node test cases.
config.substitutions.append(
    ("%onnx_encode", f"{config.gptc_protoc} --encode=onnx.ModelProto "
                     f"-I{config.gptc_onnx_include} onnx/onnx.proto"))
config.substitutions.append(
    ("%onnx_node_tests", "/usr/share/libonnx-testdata/data/node"))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# Tools: ours from the build tree, FileCheck & co. from LLVM's.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.gptc_tools_dir, config.llvm_tools_dir]
tools = [
    "gptc",
    "gptc-opt",
    "gptc-onnx-test",
    "gptc-run",
    "gptc-runtime",
    "gptc-capi-example",
    ToolSubst("gptc-device-info", unresolved="ignore"),
    ToolSubst("gptc-attention-bench", unresolved="ignore"),
    ToolSubst("gptc-fuzz-description", unresolved="ignore"),
    ToolSubst("gptc-fuzz-mesh", unresolved="ignore"),
    ToolSubst("gptc-fuzz-artifact", unresolved="ignore"),
    ToolSubst("gptc-fuzz-checkpoint", unresolved="ignore"),
    ToolSubst("gptc-fuzz-npy", unresolved="ignore"),
    ToolSubst("gptc-fuzz-onnx", unresolved="ignore"),
    ToolSubst("%gptc-unittests", os.path.join(config.gptc_obj_root, "unittests", "GPTCUnitTests")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# MLIR's JIT runner and its runtime libraries (mlir-22-tools, libmlir-22-dev)
# execute lowered IR in the lowering tests.
runner_libs = [os.path.join(config.llvm_tools_dir, "..", "lib", name)
               for name in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so")]
if shutil.which("mlir-runner", path=config.llvm_tools_dir) and all(map(os.path.exists, runner_libs)):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_runner_libs", ",".join(runner_libs)))
    # The CUDA emulation the generated GPU kernels run under on the CPU
    # (lib/Runtime/VirtualCuda/NvvmEmulation.cpp, for gptc-gpu-emulate-on-host's output).
    emulation = os.path.join(config.gptc_obj_root, "lib", "libGptcNvvmEmulation.so")
    if os.path.exists(emulation):
        config.available_features.add("nvvm-emulation")
        config.substitutions.append(("%nvvm_emulation_lib", emulation))

# Optional features. `cuda-device` only where a GPU answers; `nvcc` where the
# CUDA compiler is installed (its output is compiled for sm_90 everywhere).
if config.gptc_have_cuda:
    config.available_features.add("cuda")
    config.substitutions.append(("%nvcc", config.gptc_cuda_compiler))
    config.substitutions.append(("%cuda_arch", config.gptc_cuda_architectures))
# The CUDA toolkit's ptxas and libdevice: the GPU kernels' math functions
# link libdevice and a cubin needs ptxas; PTX itself needs neither.
toolkit = config.gptc_cuda_toolkit
if toolkit and os.path.exists(os.path.join(toolkit, "bin", "ptxas")) and \
        os.path.isdir(os.path.join(toolkit, "nvvm", "libdevice")):
    config.available_features.add("cuda-toolkit")
    config.environment["CUDA_HOME"] = toolkit
if config.gptc_have_nccl:
    config.available_features.add("nccl")
# The virtual CUDA device (lib/Runtime/VirtualCuda): the GPU runtime on CPU
# stand-ins of CUDA, cuBLASLt and NCCL, where the CUDA runtime is built.
if config.gptc_have_cuda and os.path.exists(
        os.path.join(config.gptc_obj_root, "lib", "libGptcVirtualCuda.so")):
    config.available_features.add("virtual-cuda")
# MPI (MPICH) for multi-rank tests. Ranks run on this machine's cores,
# oversubscribed where -np exceeds them.
if config.gptc_mpirun and os.path.exists(config.gptc_mpirun):
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", config.gptc_mpirun))

# The ASan + UBSan build (GPTC_SANITIZE): tests that measure memory or
# speed do not apply; fuzz targets run where clang built them.
if getattr(config, "gptc_sanitize", False):
    config.available_features.add("asan")
    config.environment["ASAN_OPTIONS"] = "detect_leaks=1"
    # MPICH's UCX patches mmap as it loads, which ASan's interception does
    # not survive; UCX works without its memory hooks.
    config.environment["UCX_MEM_EVENTS"] = "no"
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
if getattr(config, "gptc_fuzz", False):
    config.available_features.add("fuzzers")

# PyTorch for the reference checks, in the Python lit runs tests with.
try:
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, timeout=120)
    if probe.returncode == 0:
        config.available_features.add("torch")
except (OSError, subprocess.SubprocessError):
    pass

# The current PyTorch stack from PyPI (scripts/install-pytorch.sh: torch
# 2.15 with the dynamo exporter, onnx, onnxscript, transformers) for the
# tests of today's exporter, Hugging Face's GPT-2 and the PyTorch bridge:
# `%torch_python` runs them, where GPTC_TORCH_VENV (default .venv) has it.
torch_venv = os.environ.get("GPTC_TORCH_VENV", os.path.join(config.gptc_src_root, ".venv"))
if not os.path.isabs(torch_venv):
    torch_venv = os.path.join(config.gptc_src_root, torch_venv)
torch_python = os.path.join(torch_venv, "bin", "python")
if os.path.exists(torch_python):
    try:
        probe = subprocess.run([torch_python, "-c", "import torch, onnx, onnxscript, transformers"],
                               capture_output=True, timeout=300)
        if probe.returncode == 0:
            config.available_features.add("torch-current")
            config.substitutions.append(("%torch_python", torch_python))
    except (OSError, subprocess.SubprocessError):
        pass

nvsmi = shutil.which("nvidia-smi")
if nvsmi:
    try:
        out = subprocess.run([nvsmi, "-L"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and "GPU" in out.stdout:
            config.available_features.add("cuda-device")
            # Multi-rank NCCL needs a GPU per rank.
            if out.stdout.count("GPU ") >= 2:
                config.available_features.add("cuda-devices-2")
    except (OSError, subprocess.SubprocessError):
        pass
