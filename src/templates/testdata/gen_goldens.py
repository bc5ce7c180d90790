#!/usr/bin/env python3
"""Renders the official chat templates of official_templates.h with Python jinja2,
configured as Hugging Face transformers' apply_chat_template configures it, over a
set of conversations, and writes jinja_goldens.json for templates_test.cc.

Usage: python3 gen_goldens.py  (from any folder; needs jinja2 >= 3)

Documented deviations of Render() from the official templates are applied here,
so that the goldens state exactly what Render() promises:
  * phi3: no eos_token after the last message when add_generation_prompt is false.
"""
import json
import os
import re

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


def load_templates():
    text = open(os.path.join(HERE, "official_templates.h"), encoding="utf-8").read()
    out = {}
    for m in re.finditer(r'inline constexpr const char\* (k\w+) =\s*R"JINJA\((.*?)\)JINJA";', text, re.S):
        out[m.group(1)] = m.group(2)
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    return env


# family -> (template constant, bos_token, eos_token)
FAMILIES = {
    "chatml": ("kRenderChatmlRef", "<|endoftext|>", "<|im_end|>"),
    "qwen3": ("kRenderQwen3", "", "<|im_end|>"),
    "qwen3.5": ("kRenderQwen35", "<|endoftext|>", "<|im_end|>"),
    "llama3": ("kRenderLlama3", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral": ("kRenderMistralV1", "<s>", "</s>"),
    "gemma": ("kRenderGemma3", "<bos>", "<eos>"),
    "phi3": ("kRenderPhi35", "<s>", ""),  # eos omitted on purpose, see above
}


# Families whose template reads enable_thinking.
THINKING_FAMILIES = ("qwen3", "qwen3.5")


def msg(role, content, **extra):
    d = {"role": role, "content": content}
    d.update(extra)
    return d


THINK1 = "<think>\nFirst I think.\n</think>\n\nA1"
CONVERSATIONS = {
    "basic": [msg("system", "S"), msg("user", "U1"), msg("assistant", "A1"), msg("user", "U2")],
    "no_system": [msg("user", "U1"), msg("assistant", "A1"), msg("user", "U2")],
    "single_user": [msg("user", "Hello there")],
    "final_assistant": [msg("system", "S"), msg("user", "U1"), msg("assistant", "A1")],
    "whitespace": [msg("system", "  S \n"), msg("user", " \t U1\u00a0\n"),
                   msg("assistant", "\n A1 \u3000"), msg("user", "U2\n\n")],
    "unicode": [msg("user", "Gr\u00fc\u00dfe, \u65e5\u672c\u8a9e \U0001F642\n\ncode:\n\tx = 1"),
                msg("assistant", "\u00bfQu\u00e9? \u0394\u03b5\u03bb\u03c4\u03b1"),
                msg("user", "\u2028line sep\u2028")],
    "empty_contents": [msg("system", ""), msg("user", ""), msg("assistant", ""), msg("user", "x")],
    "think_history": [msg("user", "U1"), msg("assistant", THINK1), msg("user", "U2")],
    "think_final": [msg("user", "U1"), msg("assistant", THINK1)],
    "think_no_open_tag": [msg("user", "U1"), msg("assistant", "reasoning only</think>\n\nanswer")],
    "think_multiple": [msg("user", "U1"),
                       msg("assistant", "<think>a</think>b<think>\n\nc\n</think>\n\nd")],
    "multi_step": [msg("user", "U1"), msg("assistant", "<think>r1</think>A1"),
                   msg("assistant", "A2 plain"), msg("assistant", "<think>r3</think>A3")],
    "tool_response_user": [msg("user", "Q"), msg("assistant", "<think>r</think>call"),
                           msg("user", "<tool_response>\n42\n</tool_response>"),
                           msg("assistant", "<think>r2</think>the answer")],
    "reasoning_field": [msg("user", "U1"),
                        msg("assistant", "plain <think>kept</think> text", reasoning_content="\nR\n")],
    "system_middle": [msg("user", "U1"), msg("assistant", "A1"), msg("system", "S2"), msg("user", "U2")],
    "starts_with_assistant": [msg("assistant", "A0"), msg("user", "U1")],
    "two_users": [msg("user", "U1"), msg("user", "U2")],
}


def main():
    templates = load_templates()
    env = make_env()
    cases = []
    for family, (const, bos, eos) in FAMILIES.items():
        tmpl = env.from_string(templates[const])
        for name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                thinking_opts = [None, False, True] if family in THINKING_FAMILIES else [None]
                for thinking in thinking_opts:
                    kwargs = dict(messages=messages, add_generation_prompt=gen,
                                  bos_token=bos, eos_token=eos)
                    if thinking is not None:
                        kwargs["enable_thinking"] = thinking
                    case = {"family": family, "conversation": name, "add_generation_prompt": gen}
                    if thinking is not None:
                        case["enable_thinking"] = thinking
                    try:
                        case["expected"] = tmpl.render(**kwargs)
                    except jinja2.exceptions.TemplateError as e:
                        case["error"] = str(e)
                    cases.append(case)
    out = {
        "generator": "src/templates/testdata/gen_goldens.py",
        "jinja2_version": jinja2.__version__,
        "note": "BOS text is included (Render with include_bos_text = true).",
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    with open(os.path.join(HERE, "jinja_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases, {sum('error' in c for c in cases)} errors")


if __name__ == "__main__":
    main()
