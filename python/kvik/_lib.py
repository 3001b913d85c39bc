"""_lib.py — finding and loading libkvik.so, and the ctypes declarations of
the C API v1 (include/kvik.h). The struct layouts here mirror kvik.h field
for field; every parameter struct starts with its size. params() makes
one: the C library's kvik_*_params_init() fills it in through a pointer,
told the size of the mirror here (no struct crosses by value)."""

import ctypes
import ctypes.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def candidates():
    """The paths tried, in order: $KVIK_LIB; a libkvik.so next to the
    package; the repository's build/ (a source checkout); the system's."""
    out = []
    env = os.environ.get("KVIK_LIB")
    if env:
        return [env]
    out.append(os.path.join(_HERE, "libkvik.so"))
    out.append(os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "libkvik.so"))
    found = ctypes.util.find_library("kvik")
    out.append(found or "libkvik.so.0")
    return out


class LibraryNotFound(OSError):
    pass


def load():
    """Loads libkvik: the first candidate that exists (any name without a
    slash is left to the dynamic loader)."""
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (no such file)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise LibraryNotFound("kvik: cannot load libkvik.so; tried " + "; ".join(tried) +
                          ". Build it with `make`, or set KVIK_LIB to its path.")


c_size_t = ctypes.c_size_t
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_float = ctypes.c_float
c_bool = ctypes.c_bool
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p

# enum kvik_finish
FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR = range(5)
FINISH_NAMES = {FINISH_STOP: "stop", FINISH_LENGTH: "length", FINISH_CANCELLED: "cancelled",
                FINISH_ERROR: "error"}
# enum kvik_kv_type
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 8}
SEED_RANDOM = 0xFFFFFFFF


class ModelParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("chat_template", c_char_p)]


class SamplingParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("temperature", c_float), ("top_k", c_int32), ("top_p", c_float),
                ("min_p", c_float), ("repeat_penalty", c_float), ("repeat_last_n", c_int32),
                ("frequency_penalty", c_float), ("presence_penalty", c_float), ("seed", c_uint64)]


class EngineParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("n_threads", c_int32), ("n_ctx", c_int32), ("max_seqs", c_int32),
                ("max_batch_tokens", c_int32), ("prefill_chunk", c_int32), ("max_queue", c_int32),
                ("kv_mem_mib", c_int64), ("kv_type", c_int32), ("prefix_cache", c_bool)]


class Event(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("request_id", c_uint64), ("choice", c_int32), ("finish", ctypes.c_int),
                ("text", ctypes.POINTER(ctypes.c_char)), ("text_len", c_size_t), ("token", c_int32),
                ("logprob", c_float), ("n_top", c_int32), ("top_ids", ctypes.POINTER(c_int32)),
                ("top_logprobs", ctypes.POINTER(c_float)), ("n_prompt", c_int32), ("n_generated", c_int32),
                ("n_cached", c_int32), ("error", c_char_p)]


EVENT_FN = ctypes.CFUNCTYPE(c_bool, c_void_p, ctypes.POINTER(Event))


class RequestParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("max_tokens", c_int32), ("n", c_int32), ("top_logprobs", c_int32),
                ("ignore_eos", c_bool), ("cache_key", c_uint64), ("sampling", ctypes.POINTER(SamplingParams)),
                ("on_event", EVENT_FN), ("user", c_void_p)]


class ChatMsg(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


_INIT = {ModelParams: "kvik_model_params_init", SamplingParams: "kvik_sampling_params_init",
         EngineParams: "kvik_engine_params_init", RequestParams: "kvik_request_params_init"}


def params(lib, cls):
    """A cls (ModelParams, SamplingParams, EngineParams, RequestParams)
    holding the library's defaults, its size that of the mirror here."""
    p = cls()
    getattr(lib, _INIT[cls])(ctypes.byref(p), ctypes.sizeof(cls))
    return p


def declare(lib):
    """Sets the argument and result types of every function used."""
    P = ctypes.POINTER
    status = ctypes.c_int
    err = [c_char_p, c_size_t]
    sigs = {
        "kvik_version": (c_char_p, []),
        "kvik_status_string": (c_char_p, [status]),
        "kvik_free": (None, [c_void_p]),
        "kvik_model_params_init": (None, [P(ModelParams), c_size_t]),
        "kvik_model_open": (status, [c_char_p, P(ModelParams), P(c_void_p)] + err),
        "kvik_model_close": (None, [c_void_p]),
        "kvik_model_path": (c_char_p, [c_void_p]),
        "kvik_model_n_vocab": (c_int32, [c_void_p]),
        "kvik_model_n_ctx_train": (c_int32, [c_void_p]),
        "kvik_model_chat_template": (c_char_p, [c_void_p]),
        "kvik_token_bos": (c_int32, [c_void_p]),
        "kvik_token_eos": (c_int32, [c_void_p]),
        "kvik_token_is_eog": (c_bool, [c_void_p, c_int32]),
        "kvik_tokenize": (c_int64, [c_void_p, c_char_p, c_size_t, c_bool, c_bool, P(c_int32), c_int64]),
        "kvik_detokenize": (c_int64, [c_void_p, P(c_int32), c_int64, c_char_p, c_size_t, c_bool]),
        "kvik_token_piece": (c_int64, [c_void_p, c_int32, c_char_p, c_size_t, c_bool]),
        "kvik_chat_render": (status, [c_void_p, P(ChatMsg), c_size_t, c_bool, P(c_void_p), P(c_size_t)] + err),
        "kvik_chat_tokenize": (status, [c_void_p, P(ChatMsg), c_size_t, c_bool, P(P(c_int32)), P(c_size_t)] + err),
        "kvik_sampling_params_init": (None, [P(SamplingParams), c_size_t]),
        "kvik_engine_params_init": (None, [P(EngineParams), c_size_t]),
        "kvik_request_params_init": (None, [P(RequestParams), c_size_t]),
        "kvik_engine_new": (status, [c_void_p, P(EngineParams), P(c_void_p)] + err),
        "kvik_engine_free": (None, [c_void_p]),
        "kvik_engine_max_tokens": (c_int32, [c_void_p]),
        "kvik_engine_submit": (status, [c_void_p, P(c_int32), c_size_t, P(RequestParams), P(c_uint64)] + err),
        "kvik_engine_cancel": (None, [c_void_p, c_uint64]),
        "kvik_generate_tokens": (status, [c_void_p, P(c_int32), c_size_t, P(RequestParams), P(c_void_p),
                                          P(ctypes.c_int)] + err),
        "kvik_generate": (status, [c_void_p, c_char_p, P(RequestParams), P(c_void_p), P(ctypes.c_int)] + err),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib
