"""A kernel's base name: its demangled C++ name without return type, template arguments and
parameter lists, so the instantiations of one kernel template count as one kernel.

`void at::native::(anonymous namespace)::foo<float, 4>(float*, int)` -> `at::native::(anonymous namespace)::foo`

A regular expression cannot do this: template arguments nest (`<A<B>, C>`), hold parentheses
(`(cudnnKernelDataType_t)0`, `{lambda(int)#1}`), and a parenthesis at the top level is either a
parameter list (cut) or the scope `(anonymous namespace)` (kept). So the name is read once,
left to right, with a stack of the brackets open.
"""

import re

_ANONYMOUS = "(anonymous namespace)"
_CLOSING = {"<": ">", "(": ")", "[": "]", "{": "}"}
# Inside a parenthesis or brace only those count: there `<` and `>` are operators, not brackets
# (`Memcpy DtoD (Device -> Device)`, `{lambda(bool)#1}` stay balanced either way).
_COUNTED_IN = {"<": "<>()[]{}", "(": "()[]{}", "[": "()[]{}", "{": "()[]{}"}
# `operator()`, `operator<<` and their kin: the symbol after `operator` is the name, not a bracket.
_OPERATOR = re.compile(r"operator\s*(\(\)|\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|&&|\|\||\+\+|--|"
                       r"[-+*/%^&|~!=<>,]=?)")
# CUDA kernels (__global__) always return void; other names carry no return type.
_RETURN_TYPE = re.compile(r"^\s*void\s+")
NO_NAME = "(no name)"


def base_kernel_name(name):
    """The kernel's name with its return type, template arguments and parameter lists cut and
    whitespace trimmed; never empty: a name that is all brackets is kept whole, a blank one is NO_NAME."""
    if name is None:
        return None
    text = _RETURN_TYPE.sub("", str(name))
    kept, i = [], 0
    while i < len(text):
        if text.startswith(_ANONYMOUS, i):
            kept.append(_ANONYMOUS)
            i += len(_ANONYMOUS)
            continue
        operator = _OPERATOR.match(text, i) if text.startswith("operator", i) and _starts_word(text, i) else None
        if operator:
            kept.append("operator" + operator.group(1))
            i = operator.end()
            continue
        char = text[i]
        if char in "<({[":
            end = _group_end(text, i)
            if char == "{":  # `{lambda(int)#1}`, `{unnamed type#1}`: a name of its own
                kept.append(text[i:end])
            elif char == "(" and not text.startswith("::", end):
                break  # the parameter list: the rest is parameters and qualifiers (` const`)
            i = end
            continue
        kept.append(char)
        i += 1
    base = " ".join("".join(kept).split())
    return base or " ".join(str(name).split()) or NO_NAME


def _starts_word(text, i):
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _group_end(text, start):
    """The index just past the bracket that closes the one at `start` (or the end of the text)."""
    stack, i = [], start
    while i < len(text):
        char = text[i]
        if text.startswith("->", i):  # an arrow, not a closing angle bracket
            i += 2
            continue
        counted = _COUNTED_IN[stack[-1]] if stack else "<({["
        if char in _CLOSING and char in counted:
            stack.append(char)
        elif stack and char == _CLOSING[stack[-1]]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return len(text)


ELLIPSIS = "…"
# A short name fitted below this many characters says nothing; a table keeps at least this much.
MIN_SHORT_CHARS = 8


def short_kernel_name(name):
    """The kernel's base name without the scope `(anonymous namespace)::`, which says nothing a
    reader of a label or a table needs: 'void pytorch_flash::flash_fwd_kernel<...>(...)' →
    'pytorch_flash::flash_fwd_kernel'."""
    return base_kernel_name(name).replace(_ANONYMOUS + "::", "")


def cut_middle(text, limit):
    """`text`, or its beginning, "…" and its end in `limit` characters: names that share a
    beginning (sm80_xmma_gemm_..._nn_n vs ..._tn_n) keep the end that tells them apart."""
    if len(text) <= limit:
        return text
    keep = max(limit - 1, 1)
    return text[:(keep + 1) // 2] + ELLIPSIS + text[len(text) - keep // 2:] if keep > 1 else text[:1] + ELLIPSIS


def short_kernel_names(names, limit):
    """{full name: short name} for `names`: each shortened as short_kernel_name does and then in
    the middle to at most `limit` characters, distinct names kept distinct. Kernels of one
    template (one base name) are told apart by where their full names differ
    (`at::native::elementwise_kernel…MulFunctor`); when not even that fits, by a number (`…#2`)."""
    full = sorted({str(n) for n in names if n is not None})
    short = {n: cut_middle(short_kernel_name(n), limit) for n in full}
    for group in _alike(full, short):
        short.update(_told_apart(group, limit))
    return short


def _alike(full, short):
    groups = {}
    for name in full:
        groups.setdefault(short[name], []).append(name)
    return [g for g in groups.values() if len(g) > 1]


# Scopes (`at::native::`, `(anonymous namespace)::`) repeat in every name of a template's
# instantiations; what tells them apart is the functor or type after them.
_SCOPES = re.compile(r"(?:\(anonymous namespace\)::|\b\w+::)+")


def _told_apart(group, limit):
    """Distinct short names for kernels whose short names coincide: the base name, "…", and each
    full name from the word where it parts from the others, scopes left out
    (`at::native::vectorized_elementwise_kernel…FillFunctor<bool>`); else numbered (`…#2`)."""
    plain = [" ".join(_SCOPES.sub("", _RETURN_TYPE.sub("", n)).split()) for n in group]
    shown = _parted(group, plain, limit, True)
    if len(set(shown)) < len(shown):  # from the template holding the difference they read alike
        shown = _parted(group, plain, limit, False)
    # Those that still read alike (they part beyond the room) are numbered in their name order.
    alike = {s for s in shown if shown.count(s) > 1}
    base = short_kernel_name(group[0])
    numbered = iter(range(1, len(group) + 1))
    return {n: s if s not in alike else _numbered(base, next(numbered), limit) for n, s in zip(group, shown)}


def _parted(group, plain, limit, with_template):
    """Each name as its head and its text from where it parts from the others, in `limit` characters."""
    parts = [_from_where_it_parts(p, [o for o in plain if o is not p], with_template) for p in plain]
    if all(p == _SCOPES.sub("", short_kernel_name(n)) for p, n in zip(plain, group)):
        head = plain[0][:min(parts)]  # no template arguments: the name itself is cut where they part
    else:
        head = short_kernel_name(group[0]) + ELLIPSIS
    tails = [p[at:] for p, at in zip(plain, parts)]
    head = cut_middle(head, max(min(len(head), limit // 2), MIN_SHORT_CHARS))
    room = max(limit - len(head), 1)
    return [head + (t if len(t) <= room else t[:max(room - 1, 1)] + ELLIPSIS) for t in tails]


def _numbered(base, number, limit):
    mark = f"{ELLIPSIS}#{number}"
    return cut_middle(base, max(limit - len(mark), 1)) + mark


_TEMPLATE_BEFORE = re.compile(r"\w+<$")


def _from_where_it_parts(text, others, with_template):
    """Where in `text` the word starts at which it first differs from the closest of `others`
    (a template's name with it: `FillFunctor<bool>`, not `bool>`)."""
    at = max(_common_prefix([text, o]) for o in others)
    while at > 0 and text[at - 1].isalnum():
        at -= 1
    template = _TEMPLATE_BEFORE.search(text, 0, at)
    if with_template and template and template.start() > 0:  # not the kernel's own template: the head shows that
        at = template.start()
    return at


def _common_prefix(texts):
    first, last = min(texts), max(texts)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return i
