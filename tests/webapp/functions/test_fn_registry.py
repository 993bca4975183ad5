"""Registry: the full graphite-web 1.1.10 function list, schema JSON, argument validation."""

import json

import pytest

from webapp.plugins import RENDER_FUNCTIONS
from webapp.functions.registry import PIE_FUNCTIONS, InputParameterError, function_info

ALL_NAMES = """
absolute add aggregate aggregateLine aggregateSeriesLists aggregateWithWildcards alias
aliasByMetric aliasByNode aliasByTags aliasQuery aliasSub alpha applyByNode areaBetween
asPercent averageAbove averageBelow averageOutsidePercentile averageSeries
averageSeriesWithWildcards avg cactiStyle changed color compressPeriodicGaps consolidateBy
constantLine countSeries cumulative currentAbove currentBelow dashed delay derivative
diffSeries diffSeriesLists divideSeries divideSeriesLists drawAsInfinite events exclude exp
exponentialMovingAverage fallbackSeries filterSeries grep group groupByNode groupByNodes
groupByTags highest highestAverage highestCurrent highestMax hitcount holtWintersAberration
holtWintersConfidenceArea holtWintersConfidenceBands holtWintersForecast identity integral
integralByInterval interpolate invert isNonNull keepLastValue legendValue limit lineWidth
linearRegression log logit lower lowest lowestAverage lowestCurrent map mapSeries maxSeries
maximumAbove maximumBelow minMax minSeries minimumAbove minimumBelow mostDeviant
movingAverage movingMax movingMedian movingMin movingSum movingWindow multiplySeries
multiplySeriesLists multiplySeriesWithWildcards nPercentile nonNegativeDerivative offset
offsetToZero pct perSecond percentileOfSeries pow powSeries randomWalk randomWalkFunction
rangeOfSeries reduce reduceSeries removeAbovePercentile removeAboveValue
removeBelowPercentile removeBelowValue removeBetweenPercentile removeEmptySeries round scale
scaleToSeconds secondYAxis seriesByTag setXFilesFactor sigmoid sin sinFunction
smartSummarize sortBy sortByMaxima sortByMinima sortByName sortByTotal squareRoot stacked
stddevSeries stdev substr sum sumSeries sumSeriesLists sumSeriesWithWildcards summarize
threshold time timeFunction timeShift timeSlice timeStack transformNull unique upper
useSeriesAbove verticalLine weightedAverage xFilesFactor
""".split()

GROUPS = {'Combine', 'Transform', 'Calculate', 'Filter Series', 'Filter Data', 'Sorting',
          'Alias', 'Graph', 'Special'}


def test_all_154_functions_registered():
    assert len(ALL_NAMES) == 154
    assert set(RENDER_FUNCTIONS.names()) == set(ALL_NAMES)
    assert PIE_FUNCTIONS.names() == ['average', 'maximum', 'minimum']


@pytest.mark.parametrize('name,group', [
    ('sumSeries', 'Combine'), ('isNonNull', 'Transform'), ('identity', 'Calculate'),
    ('exclude', 'Filter Series'), ('removeBelowValue', 'Filter Data'), ('sortBy', 'Sorting'),
    ('legendValue', 'Alias'), ('threshold', 'Graph'), ('seriesByTag', 'Special'),
    ('time', 'Transform'), ('changed', 'Special'), ('powSeries', 'Combine'),
])
def test_groups(name, group):
    assert RENDER_FUNCTIONS.get(name).group == group


def test_every_function_has_group_params_and_description():
    for name in ALL_NAMES:
        info = function_info(RENDER_FUNCTIONS.get(name))
        assert info['group'] in GROUPS, name
        assert info['description'], name
        assert info['function'].startswith(name + '('), name
        json.dumps(info)


def test_function_info_format():
    info = function_info(RENDER_FUNCTIONS.get('summarize'))
    assert info['name'] == 'summarize'
    assert info['function'] == "summarize(seriesList, intervalString, func='sum', " \
                               "alignToFrom=False)"
    assert info['params'][0] == {'name': 'seriesList', 'type': 'seriesList', 'required': True}
    assert info['params'][1] == {'name': 'intervalString', 'type': 'interval', 'required': True,
                                 'suggestions': ['10min', '1h', '1d']}
    assert info['params'][3] == {'name': 'alignToFrom', 'type': 'boolean', 'default': False}
    agg = info['params'][2]
    assert agg['default'] == 'sum' and 'median' in agg['options'] and 'rangeOf' in agg['options']
    assert agg['options'] == sorted(agg['options'])


def test_alias_names_use_their_own_name_in_signature():
    assert function_info(RENDER_FUNCTIONS.get('sum'))['function'] == 'sum(*seriesLists)'
    assert function_info(RENDER_FUNCTIONS.get('aliasByNode'))['function'] == \
        'aliasByNode(seriesList, *nodes)'


def test_agg_or_series_func_options_include_aggregators():
    params = function_info(RENDER_FUNCTIONS.get('groupByNode'))['params']
    options = params[2]['options']
    for name in ('sumSeries', 'averageSeries', 'asPercent', 'countSeries', 'average', 'sum'):
        assert name in options
    assert 'alias' not in options


def test_multiple_params_json():
    params = function_info(RENDER_FUNCTIONS.get('aliasByNode'))['params']
    assert params[1] == {'name': 'nodes', 'type': 'nodeOrTag', 'required': True,
                         'multiple': True}


def test_validate_coerces_types():
    fn = RENDER_FUNCTIONS.get('sortByName')
    args, kwargs = fn.validate([[]], {'natural': 'true', 'reverse': 0})
    assert kwargs == {'natural': True, 'reverse': False}
    fn = RENDER_FUNCTIONS.get('scale')
    assert fn.validate([[], 2], {})[0][1] == 2.0
    assert fn.validate([[], 2], {})[0][1].__class__ is float


@pytest.mark.parametrize('name,args,kwargs', [
    ('scale', [[], 2, 3], {}),
    ('scale', [[]], {}),
    ('scale', [[], 'x'], {}),
    ('consolidateBy', [[], 'median'], {}),
    ('summarize', [[], '1x'], {}),
    ('scale', [[], 2], {'bogus': 1}),
    ('delay', [[], 1.5], {}),
    ('scale', ['notalist', 2], {}),
])
def test_validate_rejects(name, args, kwargs):
    with pytest.raises(InputParameterError):
        RENDER_FUNCTIONS.get(name).validate(args, kwargs)


def test_validate_allows_multiple_trailing_args():
    fn = RENDER_FUNCTIONS.get('aliasByNode')
    args, _ = fn.validate([[], 1, 2, 'tag'], {})
    assert args == [[], 1, 2, 'tag']


def test_deprecated_series_suffix_accepted_for_agg_funcs():
    fn = RENDER_FUNCTIONS.get('aggregate')
    assert fn.validate([[], 'sumSeries'], {})[0][1] == 'sumSeries'


def test_missing_required_multiple_param():
    with pytest.raises(InputParameterError):
        RENDER_FUNCTIONS.get('aliasByNode').validate([[]], {})
    # optional multiple params may be omitted
    assert RENDER_FUNCTIONS.get('group').validate([], {}) == ([], {})


def test_params_support_dict_style_access():
    param = RENDER_FUNCTIONS.get('movingAverage').params[1]
    assert param['name'] == 'windowSize' and param['type'] == 'intOrInterval'
    assert param['required'] is True and param.get('multiple') is False
    assert param.get('bogus', 'x') == 'x'
    with pytest.raises(KeyError):
        param['bogus']
