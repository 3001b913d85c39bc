"""kvik — Python bindings of libkvik, an LLM inference engine.

Pure ctypes over libkvik.so's C API v1 (include/kvik.h): no compiled
extension. A Model is a loaded GGUF model (weights, tokenizer, chat
template) with a serving engine started on first use; every generation
goes through that engine, as `kvik serve`'s do.

    import kvik
    with kvik.Model("smollm2-135m") as m:
        ids = m.tokenize("Hello")
        print(m.generate("The capital of France is", max_tokens=16, temperature=0))
        for piece in m.stream("Once upon a time", max_tokens=32):
            print(piece, end="", flush=True)
        print(m.chat([{"role": "user", "content": "Hi!"}], max_tokens=32))
"""

import ctypes
import queue

from . import _lib

__all__ = ["Model", "Error", "version"]

_L = None


def _lib_handle():
    global _L
    if _L is None:
        try:
            _L = _lib.declare(_lib.load())
        except _lib.LibraryNotFound as e:
            raise Error(str(e)) from None
    return _L


class Error(Exception):
    """A failure the library reported: its message, and `status`, the name
    of its kvik_status ("format error", "not found", ...)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def version():
    """The library's version ("0.1.0")."""
    return _lib_handle().kvik_version().decode()


def _check(st, err):
    if st != 0:
        L = _lib_handle()
        msg = err.value.decode("utf-8", "replace") if err is not None and err.value else ""
        name = L.kvik_status_string(st).decode()
        raise Error(msg or name, name)


def _errbuf():
    return ctypes.create_string_buffer(512)


class Model:
    """A GGUF model by path or by name in the model cache ("smollm2-135m";
    $KVIK_MODELS, else ~/.cache/kvik/models).

    Engine options (None: the library's defaults): n_threads, n_ctx (the
    longest prompt + output), max_seqs (sequences at once), kv_mem_mib
    (the KV cache's size), kv_type ("f16", "q8_0" or "f32"; `kvik run`
    keeps F32 rows), prefix_cache (True: reuse the K/V of earlier
    requests' shared prefixes, as `kvik serve` does; off by default).
    chat_template names a template family that overrides the model's own
    ("chatml", "llama3", "gemma", "mistral", "phi3").
    """

    def __init__(self, path_or_name, *, chat_template=None, n_threads=None, n_ctx=None, max_seqs=None,
                 kv_mem_mib=None, kv_type=None, prefix_cache=None):
        L = _lib_handle()
        self._L = L
        self._m = None
        self._e = None
        p = _lib.params(L, _lib.ModelParams)
        if chat_template is not None:
            self._chat_template_arg = chat_template.encode()
            p.chat_template = self._chat_template_arg
        ep = _lib.params(L, _lib.EngineParams)
        for name, value in (("n_threads", n_threads), ("n_ctx", n_ctx), ("max_seqs", max_seqs),
                            ("kv_mem_mib", kv_mem_mib)):
            if value is not None:
                setattr(ep, name, int(value))
        if prefix_cache is not None:
            ep.prefix_cache = bool(prefix_cache)
        if kv_type is not None:
            if kv_type not in _lib.KV_TYPES:
                raise ValueError("kv_type must be one of %s" % ", ".join(_lib.KV_TYPES))
            ep.kv_type = _lib.KV_TYPES[kv_type]
        self._engine_params = ep
        handle = ctypes.c_void_p()
        err = _errbuf()
        _check(L.kvik_model_open(str(path_or_name).encode(), ctypes.byref(p), ctypes.byref(handle), err,
                                 len(err)), err)
        self._m = handle

    # ---- lifetime ----

    def close(self):
        """Stops the engine (cancelling what runs) and frees the model."""
        if self._e is not None:
            self._L.kvik_engine_free(self._e)
            self._e = None
        if self._m is not None:
            self._L.kvik_model_close(self._m)
            self._m = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if self._m is None:
            raise Error("kvik: the model is closed")
        return self._m

    def _engine(self):
        self._handle()
        if self._e is None:
            e = ctypes.c_void_p()
            err = _errbuf()
            _check(self._L.kvik_engine_new(self._m, ctypes.byref(self._engine_params), ctypes.byref(e), err,
                                           len(err)), err)
            self._e = e
        return self._e

    # ---- facts ----

    @property
    def path(self):
        return self._L.kvik_model_path(self._handle()).decode()

    @property
    def n_vocab(self):
        return self._L.kvik_model_n_vocab(self._handle())

    @property
    def n_ctx_train(self):
        return self._L.kvik_model_n_ctx_train(self._handle())

    @property
    def chat_template(self):
        """The chat template family kvik renders for this model, or None."""
        t = self._L.kvik_model_chat_template(self._handle())
        return t.decode() if t else None

    def is_eog(self, token):
        return bool(self._L.kvik_token_is_eog(self._handle(), int(token)))

    # ---- tokens ----

    def tokenize(self, text, add_special=False, parse_special=False):
        """Token ids of text (str or bytes). add_special adds BOS/EOS as the
        vocabulary asks; parse_special reads control-token texts
        ("<|im_start|>") as their ids, else they are plain text."""
        m = self._handle()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        n = self._L.kvik_tokenize(m, data, len(data), add_special, parse_special, None, 0)
        if n < 0:
            raise Error("kvik: cannot tokenize: " + self._L.kvik_status_string(n).decode())
        buf = (ctypes.c_int32 * max(n, 1))()
        n = self._L.kvik_tokenize(m, data, len(data), add_special, parse_special, buf, n)
        return list(buf[:n])

    def detokenize(self, ids, render_special=False):
        """The text of token ids (invalid UTF-8 shows as U+FFFD)."""
        return self.detokenize_bytes(ids, render_special).decode("utf-8", "replace")

    def detokenize_bytes(self, ids, render_special=False):
        m = self._handle()
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        n = self._L.kvik_detokenize(m, arr, len(ids), None, 0, render_special)
        if n < 0:
            raise Error("kvik: cannot detokenize: " + self._L.kvik_status_string(n).decode()
                        + " (an id outside the vocabulary?)")
        buf = ctypes.create_string_buffer(n + 1)
        self._L.kvik_detokenize(m, arr, len(ids), buf, n + 1, render_special)
        return buf.raw[:n]

    # ---- generation ----

    def _request(self, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, seed):
        L = self._L
        sp = _lib.params(L, _lib.SamplingParams)
        for name, value in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p),
                            ("repeat_penalty", repeat_penalty)):
            if value is not None:
                setattr(sp, name, float(value))
        if top_k is not None:
            sp.top_k = int(top_k)
        if seed is not None:
            sp.seed = int(seed)
        rp = _lib.params(L, _lib.RequestParams)
        if max_tokens is not None:
            rp.max_tokens = int(max_tokens)
        rp.sampling = ctypes.pointer(sp)
        return rp, sp

    def _prompt_ids(self, prompt):
        if isinstance(prompt, str):
            ids = self.tokenize(prompt, add_special=True)
        else:
            ids = [int(i) for i in prompt]
        return (ctypes.c_int32 * max(len(ids), 1))(*ids), len(ids)

    def generate(self, prompt, max_tokens=None, temperature=None, top_p=None, top_k=None, min_p=None,
                 repeat_penalty=None, seed=None, stop=None):
        """The text generated after prompt (a str, tokenized as `kvik run`
        does, or token ids). None: the library's default (max_tokens: as
        many as fit the context; sampling as `kvik run`). stop: strings
        that end the text where one first appears (not included)."""
        if stop:
            return "".join(self.stream(prompt, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty,
                                       seed, stop))
        e = self._engine()
        rp, sp = self._request(max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, seed)
        arr, n = self._prompt_ids(prompt)
        text = ctypes.c_void_p()
        finish = ctypes.c_int()
        err = _errbuf()
        _check(self._L.kvik_generate_tokens(e, arr, n, ctypes.byref(rp), ctypes.byref(text), ctypes.byref(finish),
                                            err, len(err)), err)
        try:
            out = ctypes.string_at(text.value).decode("utf-8", "replace") if text.value else ""
        finally:
            self._L.kvik_free(text)
        if finish.value == _lib.FINISH_ERROR:
            raise Error(err.value.decode("utf-8", "replace"), "error")
        return out

    def stream(self, prompt, max_tokens=None, temperature=None, top_p=None, top_k=None, min_p=None,
               repeat_penalty=None, seed=None, stop=None):
        """Like generate, yielding the text as it comes: pieces of whole
        characters. Closing the iterator early cancels the request."""
        e = self._engine()
        rp, sp = self._request(max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, seed)
        arr, n = self._prompt_ids(prompt)
        events = queue.SimpleQueue()

        def on_event(user, ev_ptr):
            ev = ev_ptr.contents
            data = ctypes.string_at(ev.text, ev.text_len) if ev.text_len else b""
            events.put((ev.finish, data, ev.error.decode("utf-8", "replace") if ev.error else None))
            return True

        cb = _lib.EVENT_FN(on_event)
        rp.on_event = cb
        rid = ctypes.c_uint64()
        err = _errbuf()
        _check(self._L.kvik_engine_submit(e, arr, n, ctypes.byref(rp), ctypes.byref(rid), err, len(err)), err)
        return _Stream(self, e, rid.value, events, cb, stop)

    def chat(self, messages, max_tokens=None, temperature=None, top_p=None, top_k=None, min_p=None,
             repeat_penalty=None, seed=None, stop=None, stream=False):
        """The assistant's reply to messages: dicts {"role", "content"} or
        (role, content) pairs, roles "system", "user", "assistant". The
        template's markers are special tokens, message contents plain
        text. stream=True returns an iterator of pieces instead."""
        ids = self.chat_tokenize(messages)
        args = (ids, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, seed, stop)
        return self.stream(*args) if stream else self.generate(*args)

    def _chat_msgs(self, messages):
        msgs = (_lib.ChatMsg * max(len(messages), 1))()
        keep = []
        for i, msg in enumerate(messages):
            role, content = (msg["role"], msg["content"]) if isinstance(msg, dict) else msg
            keep.append((role.encode(), content.encode("utf-8")))
            msgs[i].role, msgs[i].content = keep[-1]
        return msgs, keep

    def chat_render(self, messages, add_generation_prompt=True):
        """The conversation as the chat template's text."""
        msgs, keep = self._chat_msgs(messages)
        text = ctypes.c_void_p()
        n = ctypes.c_size_t()
        err = _errbuf()
        _check(self._L.kvik_chat_render(self._handle(), msgs, len(messages), add_generation_prompt,
                                        ctypes.byref(text), ctypes.byref(n), err, len(err)), err)
        try:
            return ctypes.string_at(text.value, n.value).decode("utf-8", "replace")
        finally:
            self._L.kvik_free(text)

    def chat_tokenize(self, messages, add_generation_prompt=True):
        """The conversation as the token ids to prompt the model with."""
        msgs, keep = self._chat_msgs(messages)
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        err = _errbuf()
        _check(self._L.kvik_chat_tokenize(self._handle(), msgs, len(messages), add_generation_prompt,
                                          ctypes.byref(ids), ctypes.byref(n), err, len(err)), err)
        try:
            return list(ids[:n.value])
        finally:
            self._L.kvik_free(ids)


class _Stream:
    """The pieces of one request as its events arrive (see Model.stream)."""

    def __init__(self, model, engine, rid, events, cb, stop):
        self._model = model  # keeps the engine alive
        self._engine = engine
        self._rid = rid
        self._events = events
        self._cb = cb  # the C callback: alive until the final event
        self._stop = [s for s in (stop or []) if s]
        self._held = ""  # text that may be the start of a stop string
        self._done = False  # the final event was seen
        self._ended = False  # nothing more is yielded
        self.finish = None  # "stop", "length", "cancelled" or "error" at the end

    def __iter__(self):
        return self

    def _wait_final(self):
        while not self._done:
            finish, _, error = self._events.get()
            if finish != _lib.FINISH_NONE:
                self._done = True
                if self.finish is None:
                    self.finish = _lib.FINISH_NAMES.get(finish, "error")

    def close(self):
        """Cancels the request if it still runs and waits for its end."""
        if not self._done:
            if self._model._e is not None:
                self._model._L.kvik_engine_cancel(self._engine, self._rid)
            self._wait_final()
        self._ended = True

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _cut(self, text):
        """The text that can be given out now; ends the stream at a stop."""
        text = self._held + text
        self._held = ""
        if not self._stop:
            return text
        at = min((i for i in (text.find(s) for s in self._stop) if i >= 0), default=-1)
        if at >= 0:
            self.finish = "stop"
            self.close()
            return text[:at]
        keep = 0  # the longest tail that starts some stop string
        for s in self._stop:
            for k in range(min(len(s) - 1, len(text)), keep, -1):
                if s.startswith(text[len(text) - k:]):
                    keep = k
                    break
        if keep:
            self._held = text[len(text) - keep:]
            return text[:len(text) - keep]
        return text

    def __next__(self):
        while not self._ended:
            finish, data, error = self._events.get()
            text = data.decode("utf-8", "replace")
            if finish != _lib.FINISH_NONE:
                self._done = True
                if finish == _lib.FINISH_ERROR:
                    self._ended = True
                    self.finish = "error"
                    raise Error(error or "generation failed", "error")
                piece = self._cut(text)
                if not self._ended:  # no stop string: what was held goes out
                    piece += self._held
                    self.finish = _lib.FINISH_NAMES.get(finish, "error")
                self._held = ""
                self._ended = True
                if piece:
                    return piece
                break
            piece = self._cut(text)
            if piece:
                return piece
        raise StopIteration
