"""GraphCodeBERT's data flow: the variable graph of a function and the model input built from it.

GraphCodeBERT (Guo et al., ICLR 2021) feeds the encoder the code tokens followed by the nodes of a
data-flow graph (DFG). A node is one occurrence of a variable (a code token); its edges say where its
value comes from: ``comesFrom`` (a use takes the value of the last definitions of that name, or a
declaration takes the value of its initialiser) and ``computedFrom`` (an assignment target is computed
from the variables on the right). :func:`extract_dataflow` follows ``parser/DFG.py`` of the released
code search fine-tuning (``microsoft/CodeBERT``, ``GraphCodeBERT/codesearch``), written here as one
table-driven walker instead of six copies of one function, on the tree-sitter grammars of
tree-sitter-languages. The node types each language handles are the ones DFG.py lists, quirks
included (for instance, JavaScript's plain ``x = y`` is not an assignment there, Go's ``x := y`` is not
a definition and Ruby's ``while`` loops, other than the ``while`` modifier, are not loops), so that the input
matches what the released checkpoints were fine-tuned on. Where this module differs, on purpose:

* comments are skipped as tree nodes and Python statement strings (docstrings) are dropped, instead
  of DFG.py's regex / ``tokenize`` rewrite of the text first; the tokens that remain are the same;
* a lone method is parsed inside the wrapper its grammar needs (``parse_snippet``), and the wrapper's
  tokens are not code tokens (DFG.py wrapped PHP as ``"<?php" + code + "?>"`` and kept those two tokens);
* string literals (``LanguageSpec.string_types``) are one token each, as DFG.py's ``type == 'string'``
  rule made them in the grammars of 2020; current grammars split some of them into parts;
* the walker copies the variable states on entry in every language (DFG_ruby mutated its caller's
  dictionary, which leaked else-branch definitions) and a node without the fields a rule needs falls
  back to its children (DFG.py raised, and the whole function lost its DFG). JavaScript's current
  grammar wraps ``else`` in an ``else_clause``, which is therefore a branch as ``else`` was;
* token text is read by bytes, so non-ASCII code maps each token to its own text; whitespace-only
  leaves (Go's statement-ending newlines) are not tokens (DFG.py read them as '', i.e. no subtokens).

:func:`graphcodebert_inputs` then builds the model input as ``convert_examples_to_features`` and
``TextDataset.__getitem__`` of the same ``run.py`` do: code subtokens (every leaf token tokenized with a
leading space, except the first), DFG nodes appended as ``<unk>`` tokens with position id 0, and the
graph-guided attention mask (code tokens see each other, [CLS]/[SEP] see everything, a node sees the
subtokens of its variable and the nodes it comes from). Batches are padded to their longest input
rather than to ``code_length + data_flow_length``: padding is masked out, so the vectors are the same.
Languages without a DFG here (R, or anything without a parser) keep the same input with no nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from tree_sitter import Node

from csbench.code.comments import parse_snippet
from csbench.code.languages import LANGUAGES, DataFlowGrammar, all_languages, language_spec

COMES_FROM = "comesFrom"
COMPUTED_FROM = "computedFrom"


class DataFlowNode(NamedTuple):
    """One DFG node: the variable ``name`` at code token ``index`` and where its value comes from."""

    name: str
    index: int
    relation: str  # comesFrom | computedFrom
    source_names: tuple[str, ...]
    sources: tuple[int, ...]  # code token indices


# language -> its data-flow grammar (``Language.dataflow`` in ``csbench.code.languages.<name>``)
GRAMMARS: dict[str, DataFlowGrammar] = {
    name: spec.dataflow for name, spec in all_languages().items() if spec.dataflow is not None
}
DATAFLOW_LANGUAGES = tuple(GRAMMARS)

Entry = tuple[str, int, str, list[str], list[int]]
States = dict[str, list[int]]
Key = tuple[int, int]


def code_tokens(code: str, language: str) -> tuple[list[str], dict[Key, int], Node | None]:
    """The code tokens GraphCodeBERT reads (tree-sitter leaves, string literals whole, no comments or
    Python docstrings), a map from each token's byte span in the tree to its index, and the tree's root.
    A language without a parser gives its whitespace-separated words and no tree."""
    if language not in LANGUAGES:
        return code.split(), {}, None
    snippet = parse_snippet(code, language)
    spec = language_spec(language)
    atomic, comments = spec.string_types, spec.comment_types
    lo, hi = snippet.offset, snippet.end
    tokens: list[str] = []
    index: dict[Key, int] = {}
    root = snippet.tree.root_node
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in comments or (language == "python" and _is_statement_string(node)):
            continue
        if node.child_count == 0 or node.type in atomic:
            start, end = node.start_byte, node.end_byte
            text = snippet.data[max(start, lo) - lo : max(min(end, hi), lo) - lo]
            # Zero-width (missing) nodes, the parsing wrapper and whitespace tokens (Go's statement-ending
            # newline; DFG.py read those as '', which tokenizes to nothing) are not code tokens.
            if start >= lo and end <= hi and text.strip() and not node.is_missing:
                index[(start, end)] = len(tokens)
                tokens.append(text.decode("utf-8", "replace"))
            continue
        stack.extend(reversed(node.children))
    return tokens, index, root


def _is_statement_string(node: Node) -> bool:
    """A Python statement that is only a string (a docstring, or any other bare string DFG.py's
    ``remove_comments_and_docstrings`` dropped)."""
    return (
        node.type == "expression_statement"
        and node.named_child_count == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )


class _Walker:
    """DFG.py's recursive walk for one language: ``run(node, states) -> (entries, states)``."""

    def __init__(self, grammar: DataFlowGrammar, atomic: frozenset[str], index: dict[Key, int], tokens: list[str]):
        self.g = grammar
        self.atomic = atomic
        self.index = index
        self.tokens = tokens
        self.handlers: dict[str, Callable[[Node, States], tuple[list[Entry], States]]] = {}
        for kind in grammar.definitions:
            self.handlers[kind] = self._definition
        for kind in grammar.paired_assignments:
            self.handlers[kind] = self._paired_assignment
        for kind in grammar.assignments:
            self.handlers[kind] = self._assignment
        for kind in grammar.increments:
            self.handlers[kind] = self._increment
        for kind in grammar.branches:
            self.handlers[kind] = self._branch
        for kind in grammar.for_loops:
            self.handlers[kind] = getattr(self, f"_for_{grammar.for_style}")
        for kind in grammar.foreach_loops:
            self.handlers[kind] = self._foreach
        for kind in grammar.loops:
            self.handlers[kind] = self._loop

    # -- helpers -------------------------------------------------------------------------------
    def _is_leaf(self, node: Node) -> bool:
        return node.child_count == 0 or node.type in self.atomic

    def _token(self, node: Node) -> tuple[int, str] | None:
        idx = self.index.get((node.start_byte, node.end_byte))
        return None if idx is None else (idx, self.tokens[idx])

    def variables(self, node: Node | None) -> list[tuple[int, str]]:
        """DFG.py's ``tree_to_variable_index``: the tokens below ``node`` that are not keywords or
        punctuation (a leaf whose type is its own text)."""
        found: list[tuple[int, str]] = []
        if node is None:
            return found
        stack = [node]
        while stack:
            current = stack.pop()
            if self._is_leaf(current):
                hit = self._token(current)
                if hit is not None and current.type != hit[1]:
                    found.append(hit)
            else:
                stack.extend(reversed(current.children))
        return found

    def _children(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg: list[Entry] = []
        children = node.children
        for child in children:
            if child.type in self.g.do_first:
                temp, states = self.run(child, states)
                dfg += temp
        for child in children:
            if child.type not in self.g.do_first:
                temp, states = self.run(child, states)
                dfg += temp
        return dfg, states

    @staticmethod
    def _merge_repeats(dfg: list[Entry]) -> list[Entry]:
        """Loops are walked twice: one entry per (name, token, relation) with the union of sources."""
        merged: dict[tuple[str, int, str], tuple[set[str], set[int]]] = {}
        for name, idx, relation, names, sources in dfg:
            names_seen, sources_seen = merged.setdefault((name, idx, relation), (set(), set()))
            names_seen.update(names)
            sources_seen.update(sources)
        return [(k[0], k[1], k[2], sorted(v[0]), sorted(v[1])) for k, v in merged.items()]

    def _assign_pairs(self, left: Node | None, right: Node | None, relation: str, states: States) -> list[Entry]:
        """Every variable on the left takes its value from every variable on the right, one edge each."""
        dfg: list[Entry] = []
        sources = self.variables(right)
        for idx1, name1 in self.variables(left):
            for idx2, name2 in sources:
                dfg.append((name1, idx1, relation, [name2], [idx2]))
            states[name1] = [idx1]
        return dfg

    def _assign_all(self, left: Node, right: Node, states: States) -> list[Entry]:
        """Every variable on the left is computedFrom all the variables on the right, in one edge."""
        dfg: list[Entry] = []
        sources = self.variables(right)
        for idx, code in self.variables(left):
            dfg.append((code, idx, COMPUTED_FROM, [s[1] for s in sources], [s[0] for s in sources]))
            states[code] = [idx]
        return dfg

    # -- the walk ------------------------------------------------------------------------------
    def run(self, node: Node, states: States) -> tuple[list[Entry], States]:
        states = states.copy()
        if self._is_leaf(node):
            hit = self._token(node)
            if hit is None:  # a comment, a docstring, zero-width or part of the parsing wrapper
                return [], states
            idx, code = hit
            if node.type == code:  # keyword or punctuation
                return [], states
            if code in states:
                return [(code, idx, COMES_FROM, [code], states[code].copy())], states
            if node.type == "identifier":
                states[code] = [idx]
            return [(code, idx, COMES_FROM, [], [])], states
        handler = self.handlers.get(node.type)
        if handler is None:
            return self._children(node, states)
        return handler(node, states)

    def _definition(self, node: Node, states: States) -> tuple[list[Entry], States]:
        name_field, value_field = self.g.definitions[node.type]
        name, value = node.child_by_field_name(name_field), node.child_by_field_name(value_field)
        if name is None:
            return self._children(node, states)
        dfg: list[Entry] = []
        if value is None:
            for idx, code in self.variables(name):
                dfg.append((code, idx, COMES_FROM, [], []))
                states[code] = [idx]
            return dfg, states
        dfg, states = self.run(value, states)
        dfg += self._assign_pairs(name, value, COMES_FROM, states)
        return dfg, states

    def _paired_assignment(self, node: Node, states: States) -> tuple[list[Entry], States]:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if node.type == "for_in_clause":
            left_nodes, right_nodes = [left], [node.children[-1]]
        else:
            if right is None or left is None:
                return [], states
            left_nodes = [x for x in left.children if x.type != ","]
            right_nodes = [x for x in right.children if x.type != ","]
            if len(left_nodes) != len(right_nodes):
                left_nodes, right_nodes = [left], [right]
            if not left_nodes:
                left_nodes = [left]
            if not right_nodes:
                right_nodes = [right]
            if node.type == "operator_assignment":
                left_nodes, right_nodes = [node.children[0]], [node.children[-1]]
        dfg: list[Entry] = []
        for part in right_nodes:
            temp, states = self.run(part, states)
            dfg += temp
        for left_node, right_node in zip(left_nodes, right_nodes, strict=False):
            dfg += self._assign_all(left_node, right_node, states)
        return dfg, states

    def _assignment(self, node: Node, states: States) -> tuple[list[Entry], States]:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return self._children(node, states)
        dfg, states = self.run(right, states)
        dfg += self._assign_pairs(left, right, COMPUTED_FROM, states)
        return dfg, states

    def _increment(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg = self._assign_pairs(node, node, COMPUTED_FROM, states)
        return dfg, states

    def _branch(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg: list[Entry] = []
        current = states.copy()
        others: list[States] = []
        has_else = "else" in node.type
        in_branches = False
        for child in node.children:
            if "else" in child.type:
                has_else = True
            if self.g.branch_style == "clauses":
                is_branch = child.type in self.g.branch_clauses
            else:
                in_branches = in_branches or child.type in self.g.branches
                is_branch = in_branches
            if is_branch:
                temp, new_states = self.run(child, states)
                others.append(new_states)
            else:
                temp, current = self.run(child, current)
            dfg += temp
        others.append(current)
        if self.g.keep_states == "always" or not has_else:
            others.append(states)
        merged: States = {}
        for dic in others:
            for key, value in dic.items():
                merged.setdefault(key, []).extend(value)
        return dfg, {key: sorted(set(value)) for key, value in merged.items()}

    def _loop(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg: list[Entry] = []
        for _ in range(2):
            for child in node.children:
                temp, states = self.run(child, states)
                dfg += temp
        return self._merge_repeats(dfg), states

    def _for_python(self, node: Node, states: States) -> tuple[list[Entry], States]:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return self._children(node, states)
        dfg: list[Entry] = []
        for _ in range(2):
            left_nodes = [x for x in left.children if x.type != ","]
            right_nodes = [x for x in right.children if x.type != ","]
            if len(left_nodes) != len(right_nodes) or not left_nodes or not right_nodes:
                left_nodes, right_nodes = [left], [right]
            for part in right_nodes:
                temp, states = self.run(part, states)
                dfg += temp
            for left_node, right_node in zip(left_nodes, right_nodes, strict=True):
                dfg += self._assign_all(left_node, right_node, states)
            if node.children[-1].type == "block":
                temp, states = self.run(node.children[-1], states)
                dfg += temp
        return self._merge_repeats(dfg), states

    def _for_c(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg, states = self._children(node, states)
        return self._again_after(node, dfg, states, self.g.for_init)

    def _for_go(self, node: Node, states: States) -> tuple[list[Entry], States]:
        dfg, states = self._children(node, states)
        return self._again_after(node, dfg, states, "for_clause", "update")

    def _again_after(
        self, node: Node, dfg: list[Entry], states: States, marker: str, first: str = ""
    ) -> tuple[list[Entry], States]:
        """The second pass of a C / Go ``for``: every child after the first ``marker`` child walked
        again, after that child's field ``first`` (Go's update statement) if it has one."""
        after_marker = False
        for child in node.children:
            if after_marker:
                temp, states = self.run(child, states)
                dfg += temp
            elif child.type == marker:
                part = child.child_by_field_name(first) if first else None
                if part is not None:
                    temp, states = self.run(part, states)
                    dfg += temp
                after_marker = True
        return self._merge_repeats(dfg), states

    def _for_ruby(self, node: Node, states: States) -> tuple[list[Entry], States]:
        pattern, value = node.child_by_field_name("pattern"), node.child_by_field_name("value")
        body = node.child_by_field_name("body")
        if pattern is None or value is None or body is None:
            return self._children(node, states)
        return self._twice(value, body, states, lambda current: self._assign_all(pattern, value, current))

    def _foreach(self, node: Node, states: States) -> tuple[list[Entry], States]:
        if self.g.foreach_style == "java":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        else:  # PHP: foreach ($value as $name): the first two variable_name children
            names = [child for child in node.children if child.type == "variable_name"]
            value, name = [*names, None, None][:2]
        body = node.child_by_field_name("body")
        if name is None or value is None or body is None:
            return self._children(node, states)
        return self._twice(value, body, states, lambda current: self._assign_pairs(name, value, COMPUTED_FROM, current))

    def _twice(
        self, value: Node, body: Node, states: States, assign: Callable[[States], list[Entry]]
    ) -> tuple[list[Entry], States]:
        """A for-each loop, twice (DFG.py's way of closing the loop): the iterated value, the loop
        variables ``assign`` binds (in the states it is given), the body."""
        dfg: list[Entry] = []
        for _ in range(2):
            temp, states = self.run(value, states)
            dfg += temp
            dfg += assign(states)
            temp, states = self.run(body, states)
            dfg += temp
        return self._merge_repeats(dfg), states


def extract_dataflow(code: str, language: str) -> tuple[list[str], list[DataFlowNode]]:
    """GraphCodeBERT's ``extract_dataflow``: the code tokens and the DFG nodes, sorted by token, keeping
    only the nodes that take part in an edge (as source or target). Languages without a grammar here
    (R, or no parser at all) and functions too deeply nested for the walk give tokens and no nodes."""
    tokens, index, root = code_tokens(code, language)
    grammar = GRAMMARS.get(language)
    if grammar is None or root is None:
        return tokens, []
    walker = _Walker(grammar, language_spec(language).string_types, index, tokens)
    try:
        entries, _ = walker.run(root, {})
    except RecursionError:  # DFG.py's try/except gave such functions an empty DFG too
        return tokens, []
    entries.sort(key=lambda entry: entry[1])
    linked: set[int] = set()
    for _, idx, _, _, sources in entries:
        if sources:
            linked.add(idx)
        linked.update(sources)
    nodes = [
        DataFlowNode(name, idx, relation, tuple(names), tuple(sources))
        for name, idx, relation, names, sources in entries
        if idx in linked
    ]
    return tokens, nodes


@dataclass(frozen=True)
class GraphInput:
    """One code input of GraphCodeBERT before padding (``convert_examples_to_features``)."""

    input_ids: list[int]
    position_ids: list[int]
    n_code: int  # [CLS] + code subtokens + [SEP]
    dfg_to_code: list[tuple[int, int]]  # per DFG node: its variable's subtoken span [start, end)
    dfg_to_dfg: list[list[int]]  # per DFG node: the nodes it comes from


def _subtoken_ids(tokenizer: Any, tokens: Sequence[str]) -> list[list[int]]:
    """Each code token's subtoken ids as ``run.py`` tokenizes them: ``tokenize('@ ' + x)[1:]`` (a
    leading space, as between words) except for the first token. One batched call of the fast tokenizer."""
    if not tokens:
        return []
    texts = [tokens[0]] + ["@ " + token for token in tokens[1:]]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [ids[0]] + [row[1:] for row in ids[1:]]


def graphcodebert_input(
    code: str, language: str, tokenizer: Any, code_length: int = 256, data_flow_length: int = 64
) -> GraphInput:
    """Code tokens + DFG nodes of one function, truncated to ``code_length + data_flow_length`` in all."""
    tokens, dfg = extract_dataflow(code, language)
    pieces = _subtoken_ids(tokenizer, tokens)
    spans: list[tuple[int, int]] = []
    start = 0
    for piece in pieces:
        spans.append((start, start + len(piece)))
        start += len(piece)
    flat = [i for piece in pieces for i in piece]
    total = code_length + data_flow_length
    flat = flat[: total - 2 - min(len(dfg), data_flow_length)]
    input_ids = [tokenizer.cls_token_id, *flat, tokenizer.sep_token_id]
    pad = tokenizer.pad_token_id
    position_ids = [i + pad + 1 for i in range(len(input_ids))]
    n_code = len(input_ids)
    dfg = dfg[: total - n_code]
    input_ids += [tokenizer.unk_token_id] * len(dfg)
    position_ids += [0] * len(dfg)
    node_of_token = {node.index: i for i, node in enumerate(dfg)}  # the last node of a token, as run.py
    dfg_to_dfg = [[node_of_token[s] for s in node.sources if s in node_of_token] for node in dfg]
    dfg_to_code = [(spans[node.index][0] + 1, spans[node.index][1] + 1) for node in dfg]  # +1: [CLS]
    return GraphInput(input_ids, position_ids, n_code, dfg_to_code, dfg_to_dfg)


def graph_attention_mask(example: GraphInput, length: int, cls_id: int, sep_id: int) -> np.ndarray:
    """The ``(length, length)`` boolean mask of ``TextDataset.__getitem__`` (True: may attend)."""
    mask = np.zeros((length, length), dtype=bool)
    n_code, n_all = example.n_code, len(example.input_ids)
    mask[:n_code, :n_code] = True
    for i, token in enumerate(example.input_ids):
        if token in (cls_id, sep_id):
            mask[i, :n_all] = True
    for i, (a, b) in enumerate(example.dfg_to_code):
        if a < n_code and b < n_code:
            mask[n_code + i, a:b] = True
            mask[a:b, n_code + i] = True
    for i, sources in enumerate(example.dfg_to_dfg):
        for j in sources:
            mask[n_code + i, n_code + j] = True
    return mask


def graphcodebert_inputs(
    codes: Sequence[str],
    languages: Sequence[str],
    tokenizer: Any,
    code_length: int = 256,
    data_flow_length: int = 64,
) -> dict[str, torch.Tensor]:
    """A padded batch: ``input_ids`` and ``position_ids`` ``(batch, length)`` and the boolean
    ``attention_mask`` ``(batch, length, length)``; pads have the pad id as token and position."""
    examples = [
        graphcodebert_input(code, language, tokenizer, code_length, data_flow_length)
        for code, language in zip(codes, languages, strict=True)
    ]
    length = max(len(example.input_ids) for example in examples)
    pad = tokenizer.pad_token_id
    input_ids = np.full((len(examples), length), pad, dtype=np.int64)
    position_ids = np.full((len(examples), length), pad, dtype=np.int64)
    mask = np.zeros((len(examples), length, length), dtype=bool)
    for row, example in enumerate(examples):
        n = len(example.input_ids)
        input_ids[row, :n] = example.input_ids
        position_ids[row, :n] = example.position_ids
        mask[row] = graph_attention_mask(example, length, tokenizer.cls_token_id, tokenizer.sep_token_id)
    return {
        "input_ids": torch.from_numpy(input_ids),
        "position_ids": torch.from_numpy(position_ids),
        "attention_mask": torch.from_numpy(mask),
    }
