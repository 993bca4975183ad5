"""The whisper finder: graphite-web's glob semantics, leaves vs branches, tagged names."""

from __future__ import annotations

import os

import whisper

from carbon import tags as carbon_tags
from tests.webapp.helpers import STEP, make_whisper
from webapp.storage.nodes import expand_braces, match_entries
from webapp.storage.whisper_finder import WhisperFinder


def paths(finder: WhisperFinder, pattern: str, leaves_only: bool = False) -> list[tuple]:
    return sorted((n.path, n.is_leaf) for n in finder.find_nodes(pattern, leaves_only))


def test_brace_expansion_and_matching() -> None:
    assert sorted(expand_braces('a{b,c}d{1,2}')) == ['abd1', 'abd2', 'acd1', 'acd2']
    assert expand_braces('plain') == ['plain']
    entries = ['cpu', 'cpu0', 'cpu1', 'mem', 'Cpu']
    assert match_entries(entries, 'cpu?') == ['cpu0', 'cpu1']
    assert match_entries(entries, 'cpu[!0]') == ['cpu1']
    assert match_entries(entries, '{cpu,mem}') == ['cpu', 'mem']
    assert match_entries(entries, 'c*') == ['cpu', 'cpu0', 'cpu1']  # case-sensitive


def test_glob_forms(whisper_tree: str) -> None:
    finder = WhisperFinder(whisper_tree)
    assert paths(finder, '*') == [('gaps', False), ('servers', False)]
    assert paths(finder, 'servers.*') == [('servers.db1', False), ('servers.web1', False),
                                          ('servers.web2', False)]
    assert paths(finder, 'servers.web?.cpu') == [('servers.web1.cpu', True),
                                                 ('servers.web2.cpu', True)]
    assert paths(finder, 'servers.web[2-9].*') == [('servers.web2.cpu', True),
                                                   ('servers.web2.mem', True)]
    assert paths(finder, 'servers.{db1,web1}.mem') == [('servers.db1.mem', True),
                                                       ('servers.web1.mem', True)]
    assert paths(finder, 'servers.*{1,2}.c*') == [('servers.db1.cpu', True),
                                                  ('servers.web1.cpu', True),
                                                  ('servers.web2.cpu', True)]
    assert paths(finder, 'servers.web1.cpu') == [('servers.web1.cpu', True)]
    assert paths(finder, 'servers.web1') == [('servers.web1', False)]
    assert paths(finder, 'servers.nope.*') == []
    assert paths(finder, 'servers.*.cpu.*') == []


def test_leaves_only_and_globstar(whisper_tree: str) -> None:
    finder = WhisperFinder(whisper_tree)
    assert paths(finder, 'servers.*', leaves_only=True) == []
    leaves = paths(finder, 'servers.**')
    assert ('servers.web1.cpu', True) in leaves and ('servers.db1', False) in leaves
    assert len([p for p in leaves if p[1]]) == 6
    assert paths(finder, '**.mem') == [('servers.db1.mem', True), ('servers.web1.mem', True),
                                       ('servers.web2.mem', True)]


def test_hidden_and_foreign_files_are_ignored(whisper_tree: str) -> None:
    open(os.path.join(whisper_tree, 'servers', 'web1', 'notes.txt'), 'w').close()
    whisper.create(os.path.join(whisper_tree, 'servers', 'web1', '.hidden.wsp'), [(STEP, 10)])
    finder = WhisperFinder(whisper_tree)
    assert paths(finder, 'servers.web1.*') == [('servers.web1.cpu', True),
                                               ('servers.web1.mem', True)]


def test_leaf_and_branch_with_the_same_name(whisper_tree: str) -> None:
    make_whisper(whisper_tree, 'servers.web1', [])
    finder = WhisperFinder(whisper_tree)
    assert paths(finder, 'servers.web1') == [('servers.web1', False), ('servers.web1', True)]


def test_tagged_series_use_carbon_encoding(tmp_path: object) -> None:
    root = str(tmp_path)
    name = 'disk.used;dc=us;host=a.b'
    for hash_only in (False, True):
        rel = carbon_tags.encode(name, sep=os.sep, hash_only=hash_only)
        path = os.path.join(root, rel + '.wsp')
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, [(STEP, 10)])
        finder = WhisperFinder(root)
        nodes = finder.find_nodes(name)
        assert [(n.path, n.is_leaf) for n in nodes] == [(name, True)]
        os.unlink(path)


def test_symlinked_metric_reports_real_name(tmp_path: object) -> None:
    root = str(tmp_path)
    make_whisper(root, 'real.metric', [])
    os.makedirs(os.path.join(root, 'alias'))
    os.symlink(os.path.join(root, 'real', 'metric.wsp'), os.path.join(root, 'alias', 'm.wsp'))
    node = WhisperFinder(root).find_nodes('alias.m')[0]
    assert node.path == 'alias.m' and node.real_path == 'real.metric'


def test_index_and_intervals(whisper_tree: str) -> None:
    finder = WhisperFinder(whisper_tree)
    index = finder.get_index()
    assert index[:2] == ['gaps.a', 'gaps.b'] and len(index) == 8
    leaf = finder.find_nodes('servers.web1.cpu')[0]
    (start, end), = leaf.intervals
    assert end - start >= 2880 * STEP - 5


def test_missing_root_is_empty(tmp_path: object) -> None:
    finder = WhisperFinder(str(tmp_path / 'nope'))
    assert finder.find_nodes('*') == [] and finder.get_index() == []
