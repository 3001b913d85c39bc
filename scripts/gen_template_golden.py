#!/usr/bin/env python3
"""gen_template_golden.py -- reference renderings of real chat templates for
kvik's Jinja engine: every llama.cpp models/templates/*.jinja file rendered
with every conversation of tests/data/templates/cases.json by Python Jinja2,
set up the way Hugging Face transformers' apply_chat_template sets it up:

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
      extensions=[loopcontrols, {% generation %}])  (otherwise the defaults:
      Undefined, keep_trailing_newline=False)
  filter tojson(x, ensure_ascii=False, indent=None, separators=None,
      sort_keys=False) = json.dumps with those arguments (no HTML escaping)
  raise_exception(msg)  raises jinja2.exceptions.TemplateError(msg)
  strftime_now(fmt)     the FIXED time 2026-01-15 10:30:00 UTC (unix
                        1768473000) formatted with fmt, so renders are stable
  {% generation %}...{% endgeneration %}  renders its body, as transformers'
                        AssistantTracker does when no mask is asked for (a
                        call block: a {% set %} inside stays inside)

Variables: messages, tools (None when the case has null), add_generation_prompt,
bos_token "<s>", eos_token "</s>", then the case's "vars" (which may override).

Writes tests/data/templates/golden.jsonl: a header line
  {"jinja2": VERSION, "now": 1768473000, "bos_token": "<s>", "eos_token": "</s>", "templates": SDIST}
then one line per (template, case), sorted by template file name then case name:
  {"template": FILE, "case": NAME, "ok": true, "len": UTF8_BYTES, "sha256": HEX}
  {"template": FILE, "case": NAME, "ok": false, "error": "ExceptionClass: message"}
(a template that does not compile gives the error for every case).

The templates come from the llama-cpp-python sdist that bench/build-llama.sh
and scripts/fetch-fixtures.sh use: $KVIK_PEER_DIR (default ~/.cache/kvik/peer)
/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates, else the
templates/ folder scripts/fetch-fixtures.sh extracts ($KVIK_FIXTURES, else
$KVIK_FIXTURES_CACHE or ~/.cache/kvik/fixtures, /llama-cpp-python-0.3.36);
--templates DIR overrides.

Usage (the venv: Jinja2 pinned in scripts/template-requirements.txt):
  py=$(scripts/venv.sh scripts/template-requirements.txt ~/.cache/kvik/template-venv)
  $py scripts/gen_template_golden.py                 # writes golden.jsonl
  $py scripts/gen_template_golden.py --show Qwen-Qwen3-0.6B.jinja tool_call_result
  $py scripts/gen_template_golden.py --template T.jinja --messages M.json \\
      [--tools T.json] [--no-generation-prompt] [--var enable_thinking=false ...]
  $py scripts/gen_template_golden.py --census        # Jinja features the templates use
--show and --template print the render raw on stdout (no newline added); on
an error they print it on stderr and exit 1.
"""
import argparse
import collections
import datetime
import hashlib
import json
import os
import re
import sys

import jinja2
import jinja2.ext
import jinja2.meta
from jinja2 import nodes
from jinja2.exceptions import TemplateError, TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "templates")
SDIST = "llama_cpp_python-0.3.36"
NOW = 1768473000  # 2026-01-15 10:30:00 UTC
BOS, EOS = "<s>", "</s>"


def templates_dir(arg):
    """(folder, its name for the header)."""
    if arg:
        return arg, arg
    peer = os.environ.get("KVIK_PEER_DIR") or os.path.expanduser("~/.cache/kvik/peer")
    tries = [os.path.join(peer, SDIST, "vendor", "llama.cpp", "models", "templates")]
    if os.environ.get("KVIK_FIXTURES"):
        tries.append(os.path.join(os.environ["KVIK_FIXTURES"], "templates"))
    cache = os.environ.get("KVIK_FIXTURES_CACHE") or os.path.expanduser("~/.cache/kvik/fixtures")
    tries.append(os.path.join(cache, "llama-cpp-python-0.3.36", "templates"))
    for d in tries:
        if os.path.isdir(d):
            return d, SDIST
    sys.exit("gen_template_golden: no templates folder (tried %s); run scripts/fetch-fixtures.sh "
             "or pass --templates DIR" % ", ".join(tries))


def template_files(folder):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".jinja"))
    if not names:
        sys.exit("gen_template_golden: no *.jinja in " + folder)
    return names


def read_template(path):
    # newline="" keeps the bytes as they are; Jinja normalises line ends itself
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


# ---- the environment (transformers' apply_chat_template, with a fixed clock) ----

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


FIXED_NOW = datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc)
assert FIXED_NOW == datetime.datetime(2026, 1, 15, 10, 30, 0, tzinfo=datetime.timezone.utc)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}BODY{% endgeneration %}: renders BODY. A call block
    whose callback returns caller(), as transformers' AssistantTracker is
    when it is not collecting assistant masks."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env(cls=ImmutableSandboxedEnvironment):
    env = cls(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def describe(e):
    if isinstance(e, TemplateSyntaxError):
        return "%s: %s (line %s)" % (type(e).__name__, e.message, e.lineno)
    return "%s: %s" % (type(e).__name__, e)


def compile_template(env, text):
    """(template, None) or (None, error text)."""
    try:
        return env.from_string(text), None
    except Exception as e:  # noqa: BLE001 -- any failure is data
        return None, describe(e)


def render(tmpl, messages, tools, add_generation_prompt, extra):
    """(output, None) or (None, error text)."""
    variables = {"messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt,
                 "bos_token": BOS, "eos_token": EOS}
    variables.update(extra or {})
    try:
        return tmpl.render(**variables), None
    except Exception as e:  # noqa: BLE001
        return None, describe(e)


def load_cases(path):
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    seen = set()
    for c in cases:
        for key in ("name", "messages", "tools", "add_generation_prompt"):
            if key not in c:
                sys.exit("%s: case %r lacks %r" % (path, c.get("name"), key))
        if c["name"] in seen:
            sys.exit("%s: case %r twice" % (path, c["name"]))
        seen.add(c["name"])
    return cases


def render_case(tmpl, case):
    return render(tmpl, case["messages"], case["tools"], case["add_generation_prompt"], case.get("vars"))


def write_raw(out):
    sys.stdout.buffer.write(out.encode("utf-8"))
    sys.stdout.flush()


# ---- modes ----

def golden(args):
    folder, label = templates_dir(args.templates)
    cases = sorted(load_cases(args.cases), key=lambda c: c["name"])
    env = make_env()
    lines = [{"jinja2": jinja2.__version__, "now": NOW, "bos_token": BOS, "eos_token": EOS, "templates": label}]
    n_ok = n_err = 0
    for name in template_files(folder):
        tmpl, err = compile_template(env, read_template(os.path.join(folder, name)))
        for case in cases:
            if tmpl is not None:
                out, err = render_case(tmpl, case)
            if err is None:
                data = out.encode("utf-8")
                lines.append({"template": name, "case": case["name"], "ok": True, "len": len(data),
                              "sha256": hashlib.sha256(data).hexdigest()})
                n_ok += 1
            else:
                lines.append({"template": name, "case": case["name"], "ok": False, "error": err})
                n_err += 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(tmp, args.out)
    print("wrote %s: %d renders, %d errors (jinja2 %s, templates %s)" % (args.out, n_ok, n_err, jinja2.__version__, folder))


def show(args):
    folder, _ = templates_dir(args.templates)
    tname, cname = args.show
    if not tname.endswith(".jinja"):
        tname += ".jinja"
    cases = {c["name"]: c for c in load_cases(args.cases)}
    if cname not in cases:
        sys.exit("no case %r in %s (cases: %s)" % (cname, args.cases, ", ".join(sorted(cases))))
    tmpl, err = compile_template(make_env(), read_template(os.path.join(folder, tname)))
    if tmpl is not None:
        out, err = render_case(tmpl, cases[cname])
    if err is not None:
        print(err, file=sys.stderr)
        sys.exit(1)
    write_raw(out)


def one_template(args):
    if not args.messages:
        sys.exit("--template needs --messages M.json")
    with open(args.messages, encoding="utf-8") as f:
        messages = json.load(f)
    tools = None
    if args.tools:
        with open(args.tools, encoding="utf-8") as f:
            tools = json.load(f)
    extra = {}
    for v in args.var:
        name, eq, value = v.partition("=")
        if not eq or not name:
            sys.exit("--var wants NAME=JSON, got %r" % v)
        try:
            extra[name] = json.loads(value)
        except ValueError as e:
            sys.exit("--var %s: not JSON (%s)" % (name, e))
    tmpl, err = compile_template(make_env(), read_template(args.template))
    if tmpl is not None:
        out, err = render(tmpl, messages, tools, not args.no_generation_prompt, extra)
    if err is not None:
        print(err, file=sys.stderr)
        sys.exit(1)
    write_raw(out)


# ---- census: the Jinja features the templates use ----

STMT_KEYWORDS = {"if", "elif", "else", "for", "set", "macro", "call", "filter", "break", "continue", "with",
                 "generation", "raw", "include", "import", "from", "extends", "block", "do", "autoescape"}
ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|N\{[^}]*\}|[0-7]{1,3}|.)", re.S)


def lexer_features(env, text, feat):
    toks = [t for t in env.lex(text)]
    prev_sig = None  # previous non-whitespace token
    for i, (_, kind, value) in enumerate(toks):
        if kind in ("block_begin", "variable_begin", "comment_begin"):
            if value[-1] in "-+":
                feat["whitespace control: %s" % value] += 1
            if kind == "comment_begin":
                feat["comment {# #}"] += 1
        elif kind in ("block_end", "variable_end", "comment_end"):
            v = value.strip(" \t\r\n")
            if v[:1] in "-+":
                feat["whitespace control: %s" % v] += 1
        elif kind == "raw_begin":
            feat["statement: {% raw %}"] += 1
        if kind == "name" and prev_sig is not None and prev_sig[1] == "block_begin":
            if value in STMT_KEYWORDS:
                feat["statement: {%% %s %%}" % value] += 1
            elif not value.startswith("end"):
                feat["statement: {%% %s %%} (unknown)" % value] += 1
        if kind == "name" and value in ("true", "false", "none", "True", "False", "None"):
            feat["literal spelling: %s" % value] += 1
        if kind == "name" and value == "not" and prev_sig is not None and prev_sig[2] == "is":
            feat["syntax: x is not TEST"] += 1
        if kind == "name" and value == "in" and prev_sig is not None and prev_sig[2] == "not":
            feat["syntax: x not in y"] += 1
        if kind == "string":
            for m in ESCAPE_RE.finditer(value[1:-1]):
                e = m.group(1)
                if e[0] in "uUxN" and len(e) > 1:
                    e = e[0] + "..."
                elif e[0] in "01234567":
                    e = "octal"
                elif e == "\n":
                    e = "<newline> (line continuation)"
                feat["string escape: \\%s" % e] += 1
            if "\n" in value:
                feat["string literal spanning lines"] += 1
            if prev_sig is not None and prev_sig[1] == "string":
                feat["syntax: adjacent string literals ('a' 'b')"] += 1
        if kind == "float":
            feat["literal: float"] += 1
        if kind == "integer" and "_" in value:
            feat["literal: integer with _"] += 1
        if kind == "data" and any(ord(c) > 127 for c in value):
            feat["non-ASCII text in template data"] += 1
        if kind != "whitespace":
            prev_sig = (i, kind, value)
    if text.endswith("\n"):
        feat["file ends with a newline (dropped: keep_trailing_newline=False)"] += 1


BINOPS = {nodes.Add: "+", nodes.Sub: "-", nodes.Mul: "*", nodes.Div: "/", nodes.FloorDiv: "//", nodes.Mod: "%",
          nodes.Pow: "**", nodes.Concat: "~", nodes.And: "and", nodes.Or: "or"}
CMP = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "lteq": "<=", "gteq": ">=", "in": "in", "notin": "not in"}
TEST_BY_NAME = {"select", "reject", "selectattr", "rejectattr"}


def const_str(n):
    return isinstance(n, nodes.Const) and isinstance(n.value, str)


def ast_features(env, text, feat):
    ast = env.parse(text)
    macros = {m.name for m in ast.find_all(nodes.Macro)}
    stored = {n.name for n in ast.find_all(nodes.Name) if n.ctx in ("store", "param")} | macros
    # find_undeclared_variables runs the code generator, whose optimiser folds
    # constants in place: give it a tree of its own
    for v in sorted(jinja2.meta.find_undeclared_variables(env.parse(text))):
        if v in stored:  # set somewhere, but some read may still resolve from the context
            feat["maybe input variable: %s" % v] += 1
        else:
            feat["input variable: %s" % v] += 1
    for n in ast.find_all(nodes.Node):
        t = type(n)
        if t is nodes.Filter:
            if n.node is None:
                feat["statement: {% filter NAME %} block"] += 1
            feat["filter: %s" % n.name] += 1
            for kw in n.kwargs:
                feat["filter arg: %s(%s=)" % (n.name, kw.key)] += 1
            if n.args and n.name not in TEST_BY_NAME and n.name != "map":
                feat["filter arg: %s(<%d positional>)" % (n.name, len(n.args))] += 1
            if n.name in TEST_BY_NAME:
                pos = 1 if n.name.endswith("attr") else 0
                if len(n.args) > pos and const_str(n.args[pos]):
                    feat["test (by name in %s): %s" % (n.name, n.args[pos].value)] += 1
                elif len(n.args) == pos:
                    feat["%s with no test (truthiness)" % n.name] += 1
            if n.name == "map":
                if n.args and const_str(n.args[0]):
                    feat["filter (by name in map): %s" % n.args[0].value] += 1
                for kw in n.kwargs:
                    feat["filter arg: map(%s=)" % kw.key] += 1
        elif t is nodes.Test:
            feat["test: %s" % n.name] += 1
            if n.args or n.kwargs:
                feat["test with argument: %s(...)" % n.name] += 1
        elif t is nodes.Call:
            callee = n.node
            if isinstance(callee, nodes.Getattr):
                if isinstance(callee.node, nodes.Name) and callee.node.name == "loop":
                    feat["loop method: loop.%s()" % callee.attr] += 1
                else:
                    feat["method: .%s()" % callee.attr] += 1
            elif isinstance(callee, nodes.Name):
                if callee.name in macros:
                    feat["macro call"] += 1
                elif callee.name == "caller":
                    feat["caller()"] += 1
                elif callee.name == "loop":
                    feat["recursive loop call loop(...)"] += 1
                else:
                    feat["global function: %s()" % callee.name] += 1
            elif not isinstance(callee, nodes.ExtensionAttribute):  # {% generation %}'s own call
                feat["call of %s expression" % type(callee).__name__] += 1
            if n.kwargs:
                feat["syntax: keyword arguments in calls f(k=v)"] += 1
            if n.dyn_args is not None:
                feat["syntax: f(*args)"] += 1
            if n.dyn_kwargs is not None:
                feat["syntax: f(**kwargs)"] += 1
        elif t is nodes.Getattr:
            if isinstance(n.node, nodes.Name) and n.node.name == "loop":
                feat["loop.%s" % n.attr] += 1
        elif t is nodes.Getitem:
            a = n.arg
            if isinstance(a, nodes.Slice):
                shape = "[%s:%s%s]" % ("a" if a.start else "", "b" if a.stop else "",
                                       (":" + ("-1" if isinstance(a.step, nodes.Neg) or (isinstance(a.step, nodes.Const) and a.step.value == -1) else "s")) if a.step else "")
                feat["slice x%s" % shape] += 1
                for part in (a.start, a.stop):
                    if isinstance(part, nodes.Neg) or (isinstance(part, nodes.Const) and isinstance(part.value, int) and part.value < 0):
                        feat["slice with a negative bound"] += 1
            elif isinstance(a, nodes.Neg) or (isinstance(a, nodes.Const) and isinstance(a.value, int) and a.value < 0):
                feat["subscript with a negative index x[-n]"] += 1
            elif const_str(a):
                feat["subscript with a string x['key']"] += 1
            elif isinstance(a, nodes.Const) and isinstance(a.value, int):
                feat["subscript with an integer x[n]"] += 1
            else:
                feat["subscript with an expression x[e]"] += 1
        elif t in BINOPS:
            op = BINOPS[t]
            if t is nodes.Mod and const_str(n.left):
                feat["syntax: 'string' % value (printf formatting)"] += 1
            elif t is nodes.Mul and (const_str(n.left) or const_str(n.right)):
                feat["syntax: 'string' * n (repetition)"] += 1
            else:
                feat["operator: %s" % op] += 1
        elif t is nodes.Neg:
            feat["operator: unary -"] += 1
        elif t is nodes.Pos:
            feat["operator: unary +"] += 1
        elif t is nodes.Not:
            feat["operator: not"] += 1
        elif t is nodes.Compare:
            for o in n.ops:
                feat["operator: %s" % CMP[o.op]] += 1
            if len(n.ops) > 1:
                feat["syntax: chained comparison a < b < c"] += 1
        elif t is nodes.CondExpr:
            feat["syntax: inline if without else (x if c)" if n.expr2 is None else "syntax: inline if-else (x if c else y)"] += 1
        elif t is nodes.Dict:
            feat["literal: dict {...}" if n.items else "literal: empty dict {}"] += 1
        elif t is nodes.List:
            feat["literal: list [...]" if n.items else "literal: empty list []"] += 1
        elif t is nodes.Tuple and n.ctx == "load":
            feat["literal: tuple (a, b)"] += 1
        elif t is nodes.For:
            if isinstance(n.target, nodes.Tuple):
                feat["for with unpacking (for k, v in ...)"] += 1
            if n.test is not None:
                feat["for with filter (for x in y if c)"] += 1
            if n.else_:
                feat["for ... else"] += 1
            if n.recursive:
                feat["for ... recursive"] += 1
        elif t is nodes.If:
            if n.elif_:
                feat["if ... elif"] += 1
            if n.else_:
                feat["if ... else"] += 1
        elif t is nodes.Macro:
            if n.defaults:
                feat["macro with default arguments"] += 1
            names = {x.name for x in n.find_all(nodes.Name)}
            if "varargs" in names or "kwargs" in names:
                feat["macro using varargs/kwargs"] += 1
        elif t is nodes.CallBlock:
            if not (isinstance(n.call.node, nodes.ExtensionAttribute)):
                feat["statement: {% call %} block"] += 1
        elif t is nodes.AssignBlock:
            feat["statement: {% set x %}...{% endset %}"] += 1
            if n.filter is not None:
                feat["set block with a filter {% set x | f %}"] += 1
        elif t is nodes.Assign:
            if isinstance(n.target, nodes.NSRef):
                feat["set ns.attr = ... (namespace assignment)"] += 1
            elif isinstance(n.target, nodes.Tuple):
                feat["set with unpacking {% set a, b = ... %}"] += 1
            else:
                feat["set x = ..."] += 1
        elif t is nodes.With:
            feat["statement: {% with %}"] += 1
        elif t is nodes.ExprStmt:
            feat["statement: {% do %}"] += 1
        elif t is nodes.Const:
            feat["literal type: %s" % type(n.value).__name__] += 1


class CensusEnv(ImmutableSandboxedEnvironment):
    """The same environment, watching what renders touch: methods called on
    which types, attribute lookups, values printed by {{ }}."""
    seen = None

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's signature)
        owner = getattr(__obj, "__self__", None)
        if (owner is not None and not isinstance(owner, (type, jinja2.ext.Extension))
                and hasattr(__obj, "__name__")):
            __self.seen["runtime method: %s.%s()" % (type(owner).__name__, __obj.__name__)] += 1
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj, attribute):
        rv = super().getattr(obj, attribute)
        if isinstance(obj, dict) and attribute in obj:
            self.seen["runtime: dict key read as attribute (x.key)"] += 1
        elif isinstance(obj, dict) and not hasattr(obj, attribute):
            self.seen["runtime: missing dict key as attribute -> undefined"] += 1
        return rv


def watch_filters(env, seen):
    def wrap(kind, name, f):
        passes = getattr(f, "jinja_pass_arg", None)

        def w(*args, **kwargs):
            v = args[1] if passes is not None else args[0]
            seen["runtime %s input: %s(%s)" % (kind, name, type(v).__name__)] += 1
            return f(*args, **kwargs)
        if passes is not None:
            w.jinja_pass_arg = passes
        return w
    for name, f in list(env.filters.items()):
        env.filters[name] = wrap("filter", name, f)
    for name, f in list(env.tests.items()):
        env.tests[name] = wrap("test", name, f)


def census(args):
    folder, _ = templates_dir(args.templates)
    cases = load_cases(args.cases)
    env = make_env()
    static = collections.defaultdict(dict)   # feature -> {template: occurrences}
    runtime = collections.defaultdict(dict)
    names = template_files(folder)
    for name in names:
        text = read_template(os.path.join(folder, name))
        # static: the template's tokens and syntax tree
        feat = collections.Counter()
        try:
            lexer_features(env, text, feat)
            ast_features(env, text, feat)
        except TemplateSyntaxError as e:
            feat["does not parse: " + describe(e)] += 1
        for k, v in feat.items():
            static[k][name] = v
        # runtime: every case rendered, watched
        seen = collections.Counter()
        cenv = make_env(CensusEnv)
        cenv.seen = seen
        watch_filters(cenv, seen)
        cenv.finalize = lambda v, seen=seen: (seen.update(["runtime output {{ }}: %s" % type(v).__name__]), v)[1]
        tmpl, err = compile_template(cenv, text)
        if tmpl is not None:
            for case in cases:
                render_case(tmpl, case)
        for k, v in seen.items():
            runtime[k][name] = v
    # a name a template both sets and reads from the context is an input when
    # some other template takes it as one; else only a sign of Jinja's scoping
    for k in [k for k in static if k.startswith("maybe input variable: ")]:
        v = k.split(": ", 1)[1]
        for name, count in static.pop(k).items():
            if "input variable: " + v in static:
                static["input variable (also set in the template): " + v][name] = count
            else:
                static["scoping: a name {% set %} in one scope, read where the set may not reach"][name] = 1

    def dump(title, table):
        print("## %s (%d templates)" % (title, len(names)))
        for k in sorted(table, key=lambda k: (k.split(":")[0], -len(table[k]), k)):
            users = table[k]
            ex = ", ".join(sorted(users)) if len(users) <= args.examples else ""
            print("%4d  %-60s %5d uses%s" % (len(users), k, sum(users.values()), ("  [" + ex + "]") if ex else ""))
        print()
    dump("static census: templates using each feature, total occurrences", static)
    dump("runtime census over the cases: templates, total events", runtime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--templates", metavar="DIR", help="folder of *.jinja (default: the llama-cpp-python sdist's)")
    ap.add_argument("--cases", default=os.path.join(DATA, "cases.json"), help="the conversations (default %(default)s)")
    ap.add_argument("--out", default=os.path.join(DATA, "golden.jsonl"), help="default %(default)s")
    ap.add_argument("--show", nargs=2, metavar=("TEMPLATE", "CASE"), help="print one render raw")
    ap.add_argument("--template", metavar="FILE", help="render this template with --messages/--tools/--var")
    ap.add_argument("--messages", metavar="M.json")
    ap.add_argument("--tools", metavar="T.json")
    ap.add_argument("--no-generation-prompt", action="store_true")
    ap.add_argument("--var", action="append", default=[], metavar="NAME=JSON")
    ap.add_argument("--census", action="store_true", help="print the Jinja features the templates use")
    ap.add_argument("--examples", type=int, default=6, help="--census: name the templates when at most this many")
    args = ap.parse_args()
    if args.show:
        show(args)
    elif args.template:
        one_template(args)
    elif args.census:
        census(args)
    else:
        golden(args)


if __name__ == "__main__":
    main()
