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
