"""Runs the commands README.md shows a user, so that the README cannot drift
from the tools.

usage: readme_commands.py README.md REPO BUILD WORKDIR [--no-run]

Every command line of README.md's "Using it" block must have an entry in
CHECKS (and every entry a line in the README): a README edit that adds or
changes a command fails here until the command is checked. Each is run with
bash in WORKDIR, where `build` and `models` point at the build and the
repository's models and the files a user brings (model.onnx, model.mlir,
...) are made first, and must exit 0, except:
  - a training command runs 3 steps (`--stop-at-step 3` is added: the
    schedule is the command's, the run is short);
  - a command that needs an NVIDIA GPU is listed as skipped, with why;
  - a command that is the suite's own (the ONNX node tests, the device
    kernels' unit tests) names the test that runs it, and that test must
    contain it.
The error example after the block (`build/bin/gptc bad.pbtxt` and its
message) is run on a bad.pbtxt made for it and must print what the README
shows. Prints a line per command and a summary; exits 1 on any failure.
With --no-run, only checks that README's commands and CHECKS match.
"""
import os
import re
import shutil
import subprocess
import sys

RUN, SHORT, GPU, SUITE = "run", "short", "gpu", "suite"
# Run where the build has it, else listed as skipped. HOSTED: a library of
# the build loaded into another program (python3, mlir-opt-22), which an
# ASan build's libraries cannot be.
TOOLKIT, VIRTUAL, HOSTED = "toolkit", "virtual", "hosted"

# README command (without its comment) -> how it is checked. `instead`: the
# command the README writes with an elision ("...") run complete.
CHECKS = {
    "build/bin/gptc train models/tiny.pbtxt": (SHORT,),
    "build/bin/gptc sample tiny.ckpt --prompt \"The GNU\"": (RUN,),
    "build/bin/gptc train models/tiny.pbtxt --resume": (SHORT, "--stop-at-step 6"),
    "build/bin/gptc train models/tiny.pbtxt --resume --resume-changed --steps 300 --lr 3e-4": (SHORT, "--stop-at-step 8"),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --keep-checkpoints 3 --nan-policy skip": (SHORT,),
    "mpirun.mpich -np 2 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh dp=2 --zero-stage 2": (SHORT,),
    "mpirun.mpich -np 2 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh dp=2 --zero-stage 3 --grad-accum 4 --zero-reduce=microbatch": (SHORT,),
    "mpirun.mpich -np 4 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh dp=2,tp=2 --sequence-parallel": (SHORT,),
    "mpirun.mpich -np 4 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh dp=2,cp=2 --zero-stage 1": (SHORT,),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --recompute=full": (SHORT,),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --profile": (SHORT,),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --trace t.json": (SHORT,),
    "build/bin/gptc models/tiny.pbtxt --mesh dp=4 --emit=comm": (RUN,),
    "build/bin/gptc models/gpt2-124m.pbtxt --emit=summary": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=mlir": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=train": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=program": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=kernels": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=train --gemm-epilogues": (RUN,),
    "build/bin/gptc models/gpt2-124m.pbtxt --mesh pp=4 --emit=schedule --pipeline-schedule=1f1b --schedule-svg=s.svg": (RUN,),
    "build/bin/gptc models/gpt2-124m.pbtxt --mesh pp=4 --emit=schedule --pipeline-schedule=zb-h1": (RUN,),
    "mpirun.mpich -np 2 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh pp=2 --grad-accum 4 --pipeline-schedule=1f1b": (SHORT,),
    "build/bin/gptc plan models/gpt3-175b.pbtxt --hardware h100-node --devices 1024": (RUN,),
    "mpirun.mpich -np 2 build/bin/gptc calibrate -o cpu.pbtxt": (RUN,),
    "build/bin/gptc models/gpt3-175b.pbtxt --mesh auto --hardware h100-node --devices 1024 --emit=comm": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=train --device cuda": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=cuda": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=ptx": (TOOLKIT,),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --device cuda": (GPU, "needs an NVIDIA GPU"),
    "mpirun.mpich -np 2 build/bin/gptc train models/tiny.pbtxt --overwrite --device cuda --mesh dp=2": (GPU, "needs two NVIDIA GPUs"),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --device virtual-cuda": (VIRTUAL,),
    "mpirun.mpich -np 2 build/bin/gptc train models/tiny.pbtxt --overwrite --mesh dp=2 --device virtual-cuda": (VIRTUAL,),
    "build/bin/gptc models/tiny.pbtxt --mesh dp=2 --emit=streams": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=artifact --device=cuda -o tiny.gptc": (TOOLKIT,),
    "build/bin/gptc-runtime tiny.gptc --overwrite --device cuda": (GPU, "needs an NVIDIA GPU"),
    "build/bin/gptc models/tiny.pbtxt --mesh pp=2 --grad-accum 4 --emit=artifact -o pp.gptc && mpirun.mpich -np 2 build/bin/gptc-runtime pp.gptc --overwrite": (SHORT,),
    "build/bin/gptc-attention-bench --type bf16": (GPU, "needs an NVIDIA GPU"),
    "build/unittests/GPTCDeviceKernelsTests": (SUITE, "unittests/CMakeLists.txt", "gtest_discover_tests(GPTCDeviceKernelsTests"),
    "build/bin/gptc train models/tiny.pbtxt --overwrite --codegen=false": (SHORT,),
    "build/bin/gptc-opt test/Target/CPU/kernel-lowering.mlir -p 'builtin.module(gptc-kernel-lowering-pipeline)'": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=mlir --mlir-print-ir-after-all --mlir-timing": (RUN,),
    "build/bin/gptc models/tiny.pbtxt --emit=mlir -o model.mlir": (RUN,),
    "build/bin/gptc-opt model.mlir -p 'builtin.module(gptc-frontend-pipeline)'": (RUN,),
    "build/bin/gptc model.onnx --emit=mlir --onnx-dim batch=8": (RUN,),
    "build/bin/gptc model.onnx --emit=mlir --onnx-training": (RUN,),
    "build/bin/gptc train model.onnx --steps 100": (SHORT,),
    "build/bin/gptc plan model.onnx --hardware h100-node --devices 8": (RUN,),
    "PYTHONPATH=build/python /usr/bin/python3 -c 'import gptc; t = gptc.Trainer(\"models/tiny.pbtxt\"); print(t.train(steps=10))'": (HOSTED,),
    "build/bin/gptc-capi-example models/tiny.pbtxt 5 tiny-capi.ckpt": (RUN,),
    "build/bin/gptc-onnx-test /usr/share/libonnx-testdata/data/node": (SUITE, "test/Onnx/node-tests.test", "gptc-onnx-test %onnx_node_tests"),
    "build/bin/gptc-run model.onnx --input=ids.npy --input=targets.npy --output-dir=out/": (RUN,),
    "mlir-opt-22 --load-dialect-plugin=build/lib/GptcPlugin.so --load-pass-plugin=build/lib/GptcPlugin.so --pass-pipeline='builtin.module(gptc-autodiff)' model.mlir": (HOSTED,),
    "build/bin/gptc-opt model.mlir -p 'builtin.module(func.func(gptc-model-stats))'": (RUN,),
    "build/bin/gptc-opt model.mlir --gptc-autodiff -o fb.mlir": (RUN,),
    "build/bin/gptc-run fb.mlir --function=forward_backward --input=w.npy ... --output-dir=out/": (
        RUN, None,
        "build/bin/gptc-opt model.mlir --gptc-autodiff -o fb.mlir && "
        "python3 make_inputs.py fb.mlir && "
        "build/bin/gptc-run fb.mlir --function=forward_backward $(cat inputs.txt) --output-dir=out/"),
}

# The commands of docs/*.md's shell blocks (performance.md's are the
# benchmarks' records, run by bench/): the same kinds, plus SYNOPSIS (a
# usage line: every --flag it names must be one `gptc train --help` or
# `gptc --help` lists) and INSTEAD (too large to run here: what is run,
# and why).
SYNOPSIS, INSTEAD = "synopsis", "instead"
DOC_CHECKS = {
    "mlir-opt-22 --load-dialect-plugin=build/lib/GptcPlugin.so --load-pass-plugin=build/lib/GptcPlugin.so --pass-pipeline='builtin.module(gptc-autodiff)' model.mlir": (HOSTED,),
    "gptc plan models/gpt3-175b.pbtxt --hardware h100-node --devices 1024 [--top 5]": (
        INSTEAD, "gptc plan models/gpt3-175b.pbtxt --hardware h100-node --devices 1024 --top 5",
        "the optional flag given"),
    "gptc models/gpt3-175b.pbtxt --mesh auto --hardware h100-node --devices 1024 --emit=comm": (RUN,),
    "mpirun -np 8 gptc train models/gpt2-124m.pbtxt --mesh auto --hardware h100-node --devices 8": (
        INSTEAD, "gptc models/gpt2-124m.pbtxt --mesh auto --hardware h100-node --devices 8 --emit=summary",
        "8 processes of GPT-2 124M: the plan it trains is compiled, not trained"),
    "[mpirun.mpich -np N] gptc train MODEL.pbtxt [--mesh dp=D,tp=T] [--sequence-parallel] [--zero-stage S] [--grad-accum A] [--recompute none|selective|full] [--data FILES [--val-data FILES]] [--steps N] [--stop-at-step K] [--lr LR] [--warmup-steps W] [--lr-decay cosine|linear|constant] [--min-lr-ratio R] [--checkpoint PATH] [--resume [--resume-changed] | --overwrite] [--checkpoint-interval N] [--checkpoint-minutes M] [--keep-checkpoints K] [--eval-interval N] [--log-interval N] [--profile] [--profile-json FILE] [--trace FILE] [--dump-dir DIR]": (
        SYNOPSIS, "gptc train --help"),
    "gptc sample CHECKPOINT [--prompt TEXT] [--length N] [--temperature T] [--top-k K] [--seed S] [--token-ids]": (
        SYNOPSIS, "gptc sample --help"),
    "mpirun.mpich -np 4 gptc train models/tiny.pbtxt --overwrite --mesh dp=2,tp=2 --sequence-parallel --zero-stage 1": (SHORT,),
    "mpirun.mpich -np 4 gptc train models/tiny.pbtxt --overwrite --mesh dp=2,cp=2 --zero-stage 1": (SHORT,),
    "mpirun.mpich -f hosts -ppn 8 -np 16 gptc train model.pbtxt --mesh dp=16": (
        INSTEAD, "echo localhost > hosts && mpirun.mpich -f hosts -ppn 2 -np 2 gptc train "
        "models/tiny.pbtxt --mesh dp=2 --steps 2 --checkpoint hosts.ckpt",
        "a host file of this one machine: 2 processes of tiny, not 16 of a model"),
}

# The error example: a model whose tensor-parallel size does not divide its
# heads, the mesh's axis on line 12.
BAD = """name: "bad"
model {
  vocab_size: 256
  context_length: 64
  num_layers: 2
  num_heads: 6
  model_dim: 48
}
training { batch_size: 4 seq_len: 64 steps: 10 }
mesh {
  axis { name: "dp" size: 1 kind: DATA }
  axis { name: "tp" size: 4 kind: TENSOR }
}
"""

# Inputs for @forward_backward of a model.mlir (every argument, as .npy):
# parameters small and random, tokens and labels in the vocabulary.
MAKE_INPUTS = r'''
import re, sys
import numpy as np
text = open(sys.argv[1]).read()
sig = re.search(r"func\.func @forward_backward\((.*?)\)\s*->", text, re.S).group(1)
args = re.findall(r"%[\w.]+: tensor<([^>]*)>", sig)
rng = np.random.default_rng(0)
flags = []
for i, t in enumerate(args):
    *dims, dtype = t.split("x")
    shape = [int(d) for d in dims]
    if dtype.startswith("i"):
        a = rng.integers(0, 64, size=shape).astype(np.int32)
    else:
        a = (0.02 * rng.standard_normal(shape)).astype(np.float32)
    np.save("in%d.npy" % i, a)
    flags.append("--input=in%d.npy" % i)
open("inputs.txt", "w").write(" ".join(flags))
'''


def readme_commands(readme):
    text = open(readme).read()
    block = text.split("## Using it", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines, pending = [], ""
    for line in block.splitlines():
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].strip() + " "
            continue
        command = re.split(r"\s+#\s", line, 1)[0].strip()
        if command:
            lines.append(command)
    error = re.search(r"\$ (build/bin/gptc bad\.pbtxt)\n(.*?)```", text, re.S)
    return lines, error


def docs_commands(repo):
    """(file, command) of each line of docs/*.md's shell blocks, continued
    lines joined (performance.md's left to bench/)."""
    out = []
    docs = os.path.join(repo, "docs")
    for name in sorted(os.listdir(docs)):
        if not name.endswith(".md") or name == "performance.md":
            continue
        text = open(os.path.join(docs, name)).read()
        for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S):
            pending = ""
            for line in block.splitlines():
                line = pending + line.strip()
                pending = ""
                if line.endswith("\\"):
                    pending = line[:-1].strip() + " "
                    continue
                # A usage line continued on the next without a backslash.
                if line.startswith("[") and out and out[-1][1].startswith("[") and \
                        out[-1][0] == name and not line.startswith("[mpirun"):
                    out[-1] = (name, out[-1][1] + " " + line)
                    continue
                command = re.split(r"\s+#\s", line, 1)[0].strip()
                if command:
                    out.append((name, command))
    return out


def prepare(repo, build, work, python):
    os.makedirs(work, exist_ok=True)
    for name, target in (("build", build), ("models", os.path.join(repo, "models")),
                         ("test", os.path.join(repo, "test"))):
        if not os.path.lexists(os.path.join(work, name)):
            os.symlink(target, os.path.join(work, name))
    run = lambda cmd: subprocess.run(cmd, shell=True, cwd=work, check=True,
                                     stdout=subprocess.DEVNULL)
    run("build/bin/gptc models/tiny.pbtxt --emit=mlir -o model.mlir")
    open(os.path.join(work, "make_inputs.py"), "w").write(MAKE_INPUTS)
    open(os.path.join(work, "bad.pbtxt"), "w").write(BAD)
    # A GPT-2 exported from PyTorch, and a batch for its inputs.
    onnx = os.path.join(repo, "test", "Onnx", "Inputs", "gpt2_train.py")
    run("%s %s export ." % (python, onnx))
    shutil.move(os.path.join(work, "gpt2.onnx"), os.path.join(work, "model.onnx"))
    run("%s -c \"import numpy as np; a = np.arange(128, dtype=np.int64).reshape(4, 32) %% 256; "
        "np.save('ids.npy', a); np.save('targets.npy', (a + 1) %% 256)\"" % python)


def shortened(command, extra="--stop-at-step 3"):
    """`command` with `extra` after each training command of the line
    (gptc train, gptc-runtime): the schedule is the command's, the run short."""
    return re.sub(r"(gptc train [^&]*?|gptc-runtime [^&]*?)(\s*(&&|$))",
                  lambda m: m.group(1) + " " + extra + m.group(2), command)


def shell(command, work, env):
    """(exit status, output) of `command` under bash in `work`."""
    proc = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace", timeout=600)
    return proc.returncode, proc.stdout


def main():
    readme, repo, build, work = sys.argv[1:5]
    python = sys.executable
    commands, error = readme_commands(readme)
    failures = []
    for c in commands:
        if c not in CHECKS:
            failures.append("README command without a check: " + c)
    for c in CHECKS:
        if c not in commands:
            failures.append("a check of no README command: " + c)
    documented = docs_commands(repo)
    for name, c in documented:
        if c not in DOC_CHECKS:
            failures.append("docs/%s command without a check: %s" % (name, c))
    if "--no-run" in sys.argv[5:]:
        for f in failures:
            print("FAIL " + f)
        print("README: %d commands, %d checks; %d failures" % (
            len(commands), len(CHECKS), len(failures)))
        sys.exit(1 if failures else 0)
    prepare(repo, build, work, python)
    # `python3` is the suite's Python (with numpy and torch).
    env = dict(os.environ, PATH=os.pathsep.join([
        os.path.join(work, "build", "bin"), os.path.dirname(python),
        os.environ["PATH"]]))
    counts = {RUN: 0, GPU: 0, SUITE: 0}
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cache = os.path.join(build, "CMakeCache.txt")
    sanitized = os.path.exists(cache) and \
        "GPTC_SANITIZE:BOOL=ON" in open(cache).read()
    have = {
        TOOLKIT: os.path.exists(os.path.join(home, "bin", "ptxas")) and
        os.path.isdir(os.path.join(home, "nvvm", "libdevice")),
        VIRTUAL: os.path.exists(os.path.join(build, "lib", "libGptcVirtualCuda.so")),
        HOSTED: not sanitized,
    }
    why = {TOOLKIT: "needs the CUDA toolkit (ptxas, libdevice)",
           VIRTUAL: "this build has no CUDA runtime (virtual device)",
           HOSTED: "an ASan build's library does not load into an "
                   "unsanitized program"}
    for c in commands:
        check = CHECKS.get(c)
        if not check:
            continue
        kind = check[0]
        if kind in have:
            if not have[kind]:
                check = (GPU, why[kind])
            else:
                check = (SHORT,) if kind == VIRTUAL else (RUN,)
            kind = check[0]
        if kind == GPU:
            counts[GPU] += 1
            print("skipped (%s): %s" % (check[1], c))
            continue
        if kind == SUITE:
            path, needle = check[1], check[2]
            if needle not in open(os.path.join(repo, path)).read():
                failures.append("%s does not run %s" % (path, needle))
            counts[SUITE] += 1
            print("run by %s: %s" % (path, c))
            continue
        command = check[2] if len(check) > 2 else c
        if kind == SHORT:
            command = shortened(command, *check[1:2])
        status, output = shell(command, work, env)
        if status != 0:
            failures.append("exit %d: %s\n%s" % (status, command, output[-2000:]))
            print("FAIL: " + c)
        else:
            counts[RUN] += 1
            print("ran: " + c)
    # docs/*.md: every shell-block command has a check (above), and runs.
    for c in DOC_CHECKS:
        if c not in [d for _, d in documented]:
            failures.append("a check of no docs command: " + c)
    docs_ran = docs_skipped = 0
    for name, c in documented:
        check = DOC_CHECKS.get(c)
        if not check:
            continue
        kind = check[0]
        if kind == SYNOPSIS:
            help_text = shell(check[1], work, env)[1]
            missing = [f for f in sorted(set(re.findall(r"--[\w-]+", c)))
                       if not re.search(r"(?m)^\s*%s(?=[\s=])" % re.escape(f), help_text)]
            if missing:
                failures.append("docs/%s names flags `%s` does not list: %s" % (
                    name, check[1], " ".join(missing)))
                print("FAIL: " + c)
            else:
                docs_ran += 1
                print("docs/%s: flags listed by %s: %s" % (name, check[1], c[:60]))
            continue
        if kind == HOSTED and not have[HOSTED]:
            docs_skipped += 1
            print("docs/%s: skipped (%s): %s" % (name, why[HOSTED], c))
            continue
        command, note = c, ""
        if kind == INSTEAD:
            command, note = check[1], " (instead: %s; %s)" % (check[1], check[2])
        elif kind == SHORT:
            command = shortened(command)
        command = command.replace("mpirun ", "mpirun.mpich ")
        status, output = shell(command, work, env)
        if status != 0:
            failures.append("docs/%s: exit %d: %s\n%s" % (name, status, command,
                                                       output[-2000:]))
            print("FAIL: " + c)
        else:
            docs_ran += 1
            print("docs/%s: ran: %s%s" % (name, c, note))
    if not error:
        failures.append("README has no `build/bin/gptc bad.pbtxt` example")
    else:
        status, output = shell(error.group(1), work, env)
        shown = error.group(2).rstrip("\n")
        if status == 0 or output.rstrip("\n") != shown:
            failures.append("the README's error example prints:\n%s\nnot:\n%s" % (
                output, shown))
        else:
            print("error example: as shown")
    for f in failures:
        print("FAIL " + f)
    print("README: %d commands: %d ran, %d skipped, %d run by other tests" % (
        len(commands), counts[RUN], counts[GPU], counts[SUITE]))
    print("docs: %d commands: %d checked, %d skipped; %d failures" % (
        len(documented), docs_ran, docs_skipped, len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
