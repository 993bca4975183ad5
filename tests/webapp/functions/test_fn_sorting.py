"""Sorting group."""

from tests.webapp.functions.fnhelpers import call, ts


def sample():
    return [ts('host10', [1, 9]), ts('host2', [5, 5]), ts('host1', [None, None]),
            ts('Host3', [3, 0])]


def names(result):
    return [s.name for s in result]


def test_sort_by_name():
    assert names(call('sortByName', None, sample())) == ['Host3', 'host1', 'host10', 'host2']
    assert names(call('sortByName', None, sample(), True)) == \
        ['Host3', 'host1', 'host2', 'host10']
    assert names(call('sortByName', None, sample(), False, True)) == \
        ['host2', 'host10', 'host1', 'Host3']


def test_sort_by_aggregates():
    assert names(call('sortByTotal', None, sample())) == ['host10', 'host2', 'Host3', 'host1']
    assert names(call('sortByMaxima', None, sample())) == ['host10', 'host2', 'Host3', 'host1']
    # minima: drops series whose max is not > 0, ascending by min
    assert names(call('sortByMinima', None, sample())) == ['Host3', 'host10', 'host2']
    assert names(call('sortBy', None, sample())) == ['host1', 'Host3', 'host10', 'host2']
    assert names(call('sortBy', None, sample(), 'max', True)) == \
        ['host10', 'host2', 'Host3', 'host1']
