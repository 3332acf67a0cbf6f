"""gptc from Python: a ctypes binding of the C API (include/gptc-c/Trainer.h).

    import gptc
    t = gptc.Trainer("models/tiny.pbtxt", steps=200)   # or an .onnx model
    for _ in range(200):
        loss = t.train(steps=1)                        # one optimizer step
    t.save("tiny.ckpt")
    wte = t.read("wte")                                # numpy float32 array
    t.write("wte", wte * 0.5)
    loss, norm = t.train_batch(tokens, labels)         # a step on your batch

`gptc.torch` (import gptc.torch) trains a PyTorch module this way:
gptc.torch.train(module, batches, mesh=...) (docs/PyTorch.md).

The library is found beside this package in a build tree
(build/python/gptc -> build/lib/libGptcCAPI.so), or at $GPTC_CAPI_LIBRARY.
A trainer compiles the model for the CPU as `gptc train` does (on one
process, or one process per device of a mesh under mpirun) and trains it
with the batches `gptc train` would draw.
"""
import ctypes
import operator
import os

import numpy as np

__all__ = ["Trainer", "GptcError"]


class GptcError(RuntimeError):
    """An error gptc reported (a diagnostic, with its location when it has one)."""


def _library_path():
    path = os.environ.get("GPTC_CAPI_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "lib", "libGptcCAPI.so")


class _Handle(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p)]


class _Options(ctypes.Structure):
    # gptc-c/Trainer.h's GptcTrainerOptions, field for field.
    _fields_ = [("steps", ctypes.c_int64), ("mesh", ctypes.c_char_p),
                ("hardware", ctypes.c_char_p), ("devices", ctypes.c_int64),
                ("zeroStage", ctypes.c_int), ("device", ctypes.c_char_p),
                ("pipelineSchedule", ctypes.c_char_p), ("virtualStages", ctypes.c_int64),
                ("pipelineLayers", ctypes.c_char_p), ("recompute", ctypes.c_char_p),
                ("gradAccum", ctypes.c_int64), ("sequenceParallel", ctypes.c_int),
                ("contextAttention", ctypes.c_char_p), ("zeroReduce", ctypes.c_char_p),
                ("bucketMb", ctypes.c_double), ("gemmEpilogues", ctypes.c_int),
                ("codegen", ctypes.c_int), ("nanPolicy", ctypes.c_char_p),
                ("lr", ctypes.c_double), ("warmupSteps", ctypes.c_int64),
                ("lrDecay", ctypes.c_char_p), ("minLrRatio", ctypes.c_double),
                ("checkpoint", ctypes.c_char_p), ("checkpointInterval", ctypes.c_int64),
                ("keepCheckpoints", ctypes.c_int64)]


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_library_path())
    err = ctypes.POINTER(ctypes.c_void_p)
    i64, f32p = ctypes.c_int64, ctypes.POINTER(ctypes.c_float)
    signatures = {
        "gptcTrainerCreate": (_Handle, [ctypes.c_char_p, ctypes.POINTER(_Options), err]),
        "gptcTrainerGetRank": (i64, [_Handle]),
        "gptcTrainerGetNumProcesses": (i64, [_Handle]),
        "gptcTrainerGetMesh": (ctypes.c_char_p, [_Handle]),
        "gptcTrainerDestroy": (None, [_Handle]),
        "gptcTrainerGetStep": (i64, [_Handle]),
        "gptcTrainerGetNumSteps": (i64, [_Handle]),
        "gptcTrainerGetBatchSize": (i64, [_Handle]),
        "gptcTrainerGetSeqLen": (i64, [_Handle]),
        "gptcTrainerGetNumTensors": (i64, [_Handle]),
        "gptcTrainerGetTensorName": (ctypes.c_char_p, [_Handle, i64]),
        "gptcTrainerGetTensorRank": (i64, [_Handle, i64]),
        "gptcTrainerGetTensorDim": (i64, [_Handle, i64, i64]),
        "gptcTrainerGetNumParameters": (i64, [_Handle]),
        "gptcTrainerReadParameter": (ctypes.c_bool, [_Handle, ctypes.c_char_p, f32p, i64, err]),
        "gptcTrainerWriteParameter": (ctypes.c_bool, [_Handle, ctypes.c_char_p, f32p, i64, err]),
        "gptcTrainerTrain": (ctypes.c_bool, [_Handle, ctypes.c_char_p, i64, ctypes.POINTER(ctypes.c_double), err]),
        "gptcTrainerEvaluate": (ctypes.c_bool, [_Handle, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double), err]),
        "gptcTrainerTrainBatch": (ctypes.c_bool, [_Handle, ctypes.POINTER(ctypes.c_int32),
                                                  ctypes.POINTER(ctypes.c_int32), i64, i64,
                                                  ctypes.POINTER(ctypes.c_double),
                                                  ctypes.POINTER(ctypes.c_double), err]),
        "gptcTrainerSaveCheckpoint": (ctypes.c_bool, [_Handle, ctypes.c_char_p, err]),
        "gptcTrainerLoadCheckpoint": (ctypes.c_bool, [_Handle, ctypes.c_char_p, err]),
        "gptcTrainerLoadCheckpointChanged": (ctypes.c_bool, [_Handle, ctypes.c_char_p,
                                                             ctypes.POINTER(ctypes.c_void_p), err]),
        "gptcFreeString": (None, [ctypes.c_void_p]),
    }
    for name, (res, args) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _call(fn, *args):
    """Calls a C API function whose last argument is `char **error`."""
    message = ctypes.c_void_p()
    result = fn(*args, ctypes.byref(message))
    if message.value:
        text = ctypes.string_at(message.value).decode("utf-8", "replace")
        _load().gptcFreeString(message)
        raise GptcError(text.rstrip())
    return result


def _bytes(s):
    return None if s is None else os.fsencode(s)


def _count(value, what, least):
    """`value` as an int when it is one (an integer, or a float or array
    scalar that holds one exactly) and at least `least`; else a GptcError
    naming `what` (no silent truncation: steps=2.7 is not 2 steps)."""
    if isinstance(value, bool):
        raise GptcError("%s takes an integer, got %r" % (what, value))
    try:
        number = operator.index(value)
    except TypeError:
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            number = int(value)
        else:
            raise GptcError("%s takes an integer, got %r" % (what, value)) from None
    if number < least:
        raise GptcError("%s takes an integer >= %d, got %d" % (what, least, number))
    return number


def _token_ids(values, what):
    """`values` as int32 token ids, each checked: integers (or floats that
    hold integers exactly) in [0, 2**31); anything else is a GptcError
    naming the first value that does not fit and where it is."""
    array = np.asarray(values)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer) or
                                       np.issubdtype(array.dtype, np.floating)):
        raise GptcError("%s are integer token ids, got an array of %s" % (what, array.dtype))
    if np.issubdtype(array.dtype, np.floating):
        bad = ~np.isfinite(array) | (array != np.floor(array))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise GptcError("%s are integer token ids: %r at %s is not one"
                            % (what, array[at].item(), at))
    wide = array.astype(np.float64) if np.issubdtype(array.dtype, np.floating) else array
    for bad, why in ((wide < 0, "is negative"),
                     (wide > np.iinfo(np.int32).max, "does not fit an int32 token id")):
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise GptcError("%s: the token id %r at %s %s" % (what, array[at].item(), at, why))
    return np.ascontiguousarray(array.astype(np.int32, casting="unsafe"))


class Trainer:
    """A model compiled for training (on the CPU, or the CUDA runtime), with its state."""

    def __init__(self, model, steps=0, mesh=None, hardware=None, devices=0,
                 zero_stage=None, device=None, *, pipeline_schedule=None,
                 virtual_stages=None, pipeline_layers=None, recompute=None,
                 grad_accum=None, sequence_parallel=None, context_attention=None,
                 zero_reduce=None, bucket_mb=None, gemm_epilogues=None,
                 codegen=None, nan_policy=None, lr=None, warmup_steps=None,
                 lr_decay=None, min_lr_ratio=None, checkpoint=None,
                 checkpoint_interval=0, keep_checkpoints=None):
        """Compiles `model` (a .pbtxt description or an .onnx model).
        steps > 0 replaces training.steps; mesh ("dp=2,tp=2", or "auto" with
        hardware and devices) replaces the description's: a mesh of N
        devices runs under `mpirun -np N`, every rank making the same calls
        (one such trainer per process); zero_stage replaces the ZeRO stage;
        device is "cpu" (default), "cuda" or "virtual-cuda" (the GPU runtime
        on the virtual CUDA device: for tests, slow). The keyword-only
        settings are gptc train's flags of the same names (--recompute,
        --grad-accum, --lr, ...; pipeline_layers a list of layer counts);
        None keeps the description's. checkpoint (a directory) with
        checkpoint_interval N writes a checkpoint every N steps of train()."""
        lib = _load()
        self._lib = lib

        def flag(value, what):
            if value is None:
                return -1
            if isinstance(value, (bool, np.bool_)):
                return int(value)
            number = _count(value, what, 0)
            if number > 1:
                raise GptcError("%s takes True or False, got %r" % (what, value))
            return number

        def real(value, what, unset):
            if value is None:
                return unset
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                                  np.floating)):
                raise GptcError("%s takes a number, got %r" % (what, value))
            return float(value)

        layers = None
        if pipeline_layers is not None:
            layers = ",".join(str(_count(n, "pipeline_layers", 1)) for n in pipeline_layers)
        options = _Options(
            _count(steps, "steps", 0), _bytes(mesh), _bytes(hardware),
            _count(devices, "devices", 0),
            -1 if zero_stage is None else _count(zero_stage, "zero_stage", 0),
            _bytes(device), _bytes(pipeline_schedule),
            0 if virtual_stages is None else _count(virtual_stages, "virtual_stages", 1),
            _bytes(layers), _bytes(recompute),
            0 if grad_accum is None else _count(grad_accum, "grad_accum", 1),
            flag(sequence_parallel, "sequence_parallel"), _bytes(context_attention),
            _bytes(zero_reduce), real(bucket_mb, "bucket_mb", -1.0),
            flag(gemm_epilogues, "gemm_epilogues"), flag(codegen, "codegen"),
            _bytes(nan_policy), real(lr, "lr", 0.0),
            -1 if warmup_steps is None else _count(warmup_steps, "warmup_steps", 0),
            _bytes(lr_decay), real(min_lr_ratio, "min_lr_ratio", -1.0),
            _bytes(checkpoint), _count(checkpoint_interval, "checkpoint_interval", 0),
            -1 if keep_checkpoints is None else _count(keep_checkpoints, "keep_checkpoints", 0))
        self._h = _call(lib.gptcTrainerCreate, _bytes(model), ctypes.byref(options))
        if not self._h.ptr:
            raise GptcError("gptcTrainerCreate failed")

    def close(self):
        if getattr(self, "_h", None) is not None and self._h.ptr:
            self._lib.gptcTrainerDestroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def rank(self):
        """This process's rank (0 for one device)."""
        return self._lib.gptcTrainerGetRank(self._h)

    @property
    def num_processes(self):
        return self._lib.gptcTrainerGetNumProcesses(self._h)

    @property
    def mesh(self):
        """The mesh the trainer runs ("dp=2,tp=2"; "" for one device)."""
        return self._lib.gptcTrainerGetMesh(self._h).decode()

    @property
    def step(self):
        """Optimizer steps taken."""
        return self._lib.gptcTrainerGetStep(self._h)

    @property
    def num_steps(self):
        """The learning-rate schedule's length (training.steps)."""
        return self._lib.gptcTrainerGetNumSteps(self._h)

    @property
    def batch_shape(self):
        """One step's batch: (sequences, tokens)."""
        return (self._lib.gptcTrainerGetBatchSize(self._h),
                self._lib.gptcTrainerGetSeqLen(self._h))

    @property
    def num_parameters(self):
        return self._lib.gptcTrainerGetNumParameters(self._h)

    def parameter_shapes(self):
        """{name: shape} of every parameter, in the program's order."""
        out = {}
        for i in range(self._lib.gptcTrainerGetNumTensors(self._h)):
            name = self._lib.gptcTrainerGetTensorName(self._h, i).decode()
            rank = self._lib.gptcTrainerGetTensorRank(self._h, i)
            out[name] = tuple(self._lib.gptcTrainerGetTensorDim(self._h, i, d)
                              for d in range(rank))
        return out

    def read(self, name):
        """The parameter `name` as a float32 array (a copy)."""
        shape = self.parameter_shapes().get(name)
        if shape is None:
            raise GptcError("no parameter is named '%s'" % name)
        out = np.empty(shape, dtype=np.float32)
        _call(self._lib.gptcTrainerReadParameter, self._h, name.encode(),
              out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size)
        return out

    def write(self, name, value):
        """Replaces the parameter `name` (the optimizer state is kept)."""
        value = np.ascontiguousarray(value, dtype=np.float32)
        _call(self._lib.gptcTrainerWriteParameter, self._h, name.encode(),
              value.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), value.size)

    def parameters(self):
        """{name: float32 array} of every parameter."""
        return {n: self.read(n) for n in self.parameter_shapes()}

    def train(self, steps=1, data=None):
        """Trains `steps` more steps on `data` (a text or token file; None:
        the GPL-3 text) and returns the last step's loss. More steps than
        the schedule has left (num_steps - step) raise GptcError, nothing
        trained."""
        loss = ctypes.c_double()
        _call(self._lib.gptcTrainerTrain, self._h, _bytes(data), _count(steps, "steps", 1),
              ctypes.byref(loss))
        return loss.value

    def train_batch(self, tokens, labels):
        """One step on this batch: `tokens` and `labels` are the step's
        whole batch (batch_shape, integer ids; labels the ids each position
        predicts), the same on every rank. Returns (loss, gradient norm)."""
        tokens = _token_ids(tokens, "train_batch: tokens")
        labels = _token_ids(labels, "train_batch: labels")
        if tokens.shape != labels.shape or tokens.ndim != 2:
            raise GptcError("a batch is tokens and labels of one [B, T] shape, got %s and %s"
                            % (tokens.shape, labels.shape))
        loss, norm = ctypes.c_double(), ctypes.c_double()
        i32p = ctypes.POINTER(ctypes.c_int32)
        _call(self._lib.gptcTrainerTrainBatch, self._h, tokens.ctypes.data_as(i32p),
              labels.ctypes.data_as(i32p), tokens.shape[0], tokens.shape[1],
              ctypes.byref(loss), ctypes.byref(norm))
        return loss.value, norm.value

    def evaluate(self, data=None):
        """The validation loss (the last 10% of `data`)."""
        loss = ctypes.c_double()
        _call(self._lib.gptcTrainerEvaluate, self._h, _bytes(data),
              ctypes.byref(loss))
        return loss.value

    def save(self, path):
        """Writes a checkpoint directory (gptc train's format)."""
        _call(self._lib.gptcTrainerSaveCheckpoint, self._h, _bytes(path))

    def load(self, path, changed=False):
        """Loads a checkpoint (parameters, optimizer state, step). A
        checkpoint past the end of this trainer's schedule raises
        GptcError, and so does one trained with other settings (learning
        rate, schedule length, batch, ...), naming them, unless `changed`:
        then it loads and the differences are returned as text ("" when
        there are none)."""
        if not changed:
            _call(self._lib.gptcTrainerLoadCheckpoint, self._h, _bytes(path))
            return ""
        notes = ctypes.c_void_p()
        _call(self._lib.gptcTrainerLoadCheckpointChanged, self._h, _bytes(path),
              ctypes.byref(notes))
        text = ""
        if notes.value:
            text = ctypes.string_at(notes.value).decode("utf-8", "replace")
            self._lib.gptcFreeString(notes)
        return text
