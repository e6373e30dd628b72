"""The retention eval's two kinds of session: a shop's support chat, and a coding assistant's session.

**support**: a customer gives order numbers, delivery addresses (some corrected: "I have moved"), gift-wrap
colours and decisions on a replacement model (some changed), and asks for parcels to be tracked, whose tracking
numbers only the tool's return holds. Filler turns look orders and policies up.

**coding**: a developer tells the assistant which file each component lives in (some moved later), the request
caps decided on (some changed), the libraries settled on, and has the tests of a component run, whose failing
test only the tool's return names. Filler turns read files and search the code.
"""

from __future__ import annotations

from random import Random

from ._eval_script import Domain, Draw, KindSpec, ScriptedTurn, ToolSpec, ToolStep

__all__ = ('CODING', 'DOMAINS', 'SUPPORT')

_ITEMS = (
    'headphones', 'desk lamp', 'coffee grinder', 'rain jacket', 'keyboard', 'backpack', 'kettle', 'office chair',
    'yoga mat', 'blender', 'monitor', 'tent', 'toaster', 'drill', 'camera bag', 'water bottle', 'scarf',
    'bookshelf', 'frying pan', 'smartwatch', 'sleeping bag', 'speaker', 'vacuum cleaner', 'mirror', 'wall clock',
    'hiking boots', 'printer', 'duvet', 'teapot', 'bicycle helmet', 'air purifier', 'rug', 'standing desk',
    'microphone', 'suitcase', 'tripod', 'electric toothbrush', 'board game', 'winter coat', 'plant pot',
    'gaming mouse', 'cutlery set', 'paddle board', 'hair dryer', 'chess set', 'beanbag', 'telescope', 'ukulele',
)  # fmt: skip
_STREETS = ('Willow Court', 'Elm Road', 'Harbour Street', 'Mill Lane', 'Station Road', 'Orchard Way', 'Kings Avenue')
_CITIES = ('Leeds', 'York', 'Bristol', 'Glasgow', 'Cardiff', 'Norwich', 'Brighton', 'Belfast')
_COLOURS = (
    'teal', 'crimson', 'mustard', 'lilac', 'charcoal', 'coral', 'olive', 'navy', 'ivory', 'plum', 'saffron',
    'turquoise', 'burgundy', 'mint', 'amber', 'indigo', 'peach', 'cobalt', 'sage', 'magenta',
)  # fmt: skip
_POLICIES = ('returns', 'exchanges', 'late deliveries', 'damaged parcels', 'gift cards', 'price matching')
_STATUSES = ('processing', 'packed', 'shipped', 'in transit', 'out for delivery', 'delivered')
_WAREHOUSES = ('Manchester', 'Coventry', 'Rotterdam', 'Dublin')


def _address(draw: Draw) -> str:
    return draw.fresh(lambda rng: f'{rng.randint(2, 198)} {rng.choice(_STREETS)}')


def _support_filler(draw: Draw) -> ScriptedTurn:
    order = draw.unique('ORD-{}', 10000, 39999)
    choice = draw.random.randrange(3)
    if choice == 0:
        status = draw.random.choice(_STATUSES)
        warehouse = draw.random.choice(_WAREHOUSES)
        result = (
            f'{{"order_id": "{order}", "status": "{status}", "warehouse": "{warehouse}", "lines": '
            f'{draw.random.randint(1, 4)}, "paid": true, "notes": "standard shipping, signature not required"}}'
        )
        return ScriptedTurn(
            f'Hi again, what is the status of order {order}?',
            (ToolStep('order_status', order, result),),
            f'Order {order} is {status}, shipping from {warehouse}.',
        )
    if choice == 1:
        policy = draw.random.choice(_POLICIES)
        days = draw.random.choice((14, 30, 60))
        result = (
            f'Policy on {policy}: customers may ask within {days} days of delivery; keep the packaging; '
            'refunds go to the original payment method within five working days; exceptions need a manager.'
        )
        return ScriptedTurn(
            f'About order {order}: what is your policy on {policy}?',
            (ToolStep('policy', policy, result),),
            f'For {policy} you have {days} days from delivery, and refunds take about five working days.',
        )
    return ScriptedTurn(
        f'Thanks. Please also add a note to order {order} that the doorbell is broken.',
        (),
        f'Done: order {order} now carries your note for the courier.',
    )


SUPPORT = Domain(
    name='support',
    system_prompt=(
        'You are the support agent of an online shop. Look orders, parcels and policies up with your tools '
        'before answering, and remember what the customer tells you about their orders.'
    ),
    thing='item',
    items=_ITEMS,
    kinds={
        'order': KindSpec(
            'order number',
            'What is the order number of my {item}?',
            'order number',
            'The order number for my {item} is {value}; please keep it on file for later.',
            'Noted: your {item} order is on file.',
            lambda draw: draw.unique('ORD-{}', 40000, 89999),
        ),
        'address': KindSpec(
            'delivery address',
            'Which street address should the {item} be delivered to?',
            'delivered',
            'Please have the {item} delivered to {value}, {city}.',
            'Understood, the {item} will be delivered to the address you gave.',
            _address,
            correction='Correction for the {item}: I have moved, please have it delivered to {value} instead.',
        ),
        'preference': KindSpec(
            'gift-wrap colour',
            'Which colour of gift wrap did I ask for the {item}?',
            'gift wrap colour',
            'The {item} is a present: gift wrap colour {value}, please, with no invoice in the box.',
            'Of course, the {item} will be gift wrapped as you asked.',
            lambda draw: draw.fresh(lambda rng: rng.choice(_COLOURS)),
        ),
        'decision': KindSpec(
            'replacement model',
            'Which replacement model did we decide on for the {item}?',
            'replacement model',
            'Decided: no refund for the {item}, send me the replacement model {value}.',
            'Agreed, a replacement for the {item} is on its way once the return arrives.',
            lambda draw: draw.unique('KX-{}', 100, 999),
            correction='Change of plan for the {item}: we decided on the replacement model {value} after all.',
        ),
        'tool': KindSpec(
            'tracking number',
            'What is the tracking number of the {item} parcel?',
            'tracking number',
            'Could you track the parcel with my {item}?',
            'I have checked: the parcel with your {item} is in transit and due in two days.',
            lambda draw: draw.unique('TRK{}', 1000000, 9999999),
            tool=(
                'track_parcel',
                'Parcel with the {item}: tracking number {value}, left {warehouse}, in transit, due in two days.',
            ),
        ),
    },
    tools=(
        ToolSpec('order_status', 'order_id', 'The status of an order.'),
        ToolSpec('policy', 'topic', "The shop's policy on a topic."),
        ToolSpec('track_parcel', 'item', 'Where the parcel holding an item is.'),
    ),
    filler=_support_filler,
    extras=lambda draw: {
        'city': draw.random.choice(_CITIES),
        'warehouse': draw.random.choice(_WAREHOUSES),
    },
)

_COMPONENTS = (
    'rate limiter', 'payment webhook', 'login form', 'search index', 'export job', 'email queue',
    'session cache', 'audit log', 'image resizer', 'feature flags', 'report builder', 'retry policy',
    'billing cron', 'signup flow', 'csv importer', 'notification service', 'api client', 'pdf renderer',
    'settings page', 'health check', 'oauth callback', 'invoice generator', 'tag parser', 'upload handler',
    'password reset', 'webhook signer', 'geo lookup', 'thumbnail cache', 'price calculator', 'locale loader',
    'queue worker', 'theme switcher', 'sitemap generator', 'backup script', 'markdown renderer', 'cart service',
    'schema migration', 'metrics exporter', 'log shipper', 'comment moderation', 'avatar upload',
    'timezone converter', 'coupon validator', 'inventory sync', 'shipping estimator', 'tax calculator',
    'admin dashboard', 'dependency graph',
)  # fmt: skip
_AREAS = ('api', 'core', 'jobs', 'web', 'payments', 'infra')
_STEMS = ('handlers', 'service', 'models', 'utils', 'views', 'tasks', 'client', 'schema')
_LIBRARIES = (
    'httpx', 'attrs', 'orjson', 'structlog', 'tenacity', 'pendulum', 'polars', 'msgspec', 'anyio', 'typer',
    'loguru', 'trio', 'lxml', 'celery', 'alembic', 'marshmallow', 'sqlglot', 'hypothesis', 'ruamel',
    'aiofiles', 'pyjwt', 'cachetools', 'backoff', 'ujson',
)  # fmt: skip
_CASES = ('rounding', 'timeout', 'unicode', 'empty_input', 'retry', 'pagination', 'permissions', 'overflow')
_ERRORS = ('KeyError', 'TypeError', 'AssertionError', 'TimeoutError', 'ValueError', 'IndexError')
_SYMBOLS = ('load_config', 'parse_header', 'build_query', 'send_batch', 'render_row', 'check_token')


def _path(rng: Random, low: int, high: int) -> str:
    return f'{rng.choice(_AREAS)}/{rng.choice(_STEMS)}_{rng.randint(low, high)}.py'


def _coding_filler(draw: Draw) -> ScriptedTurn:
    path = draw.fresh(lambda rng: _path(rng, 100, 999))
    choice = draw.random.randrange(3)
    if choice == 0:
        name = draw.random.choice(('Settings', 'Client', 'Page', 'Batch', 'Token'))
        result = f'1 import logging\n2 from .base import {name}\n3\n4 LOG = logging.getLogger(__name__)'
        return ScriptedTurn(
            f'Show me the top of {path}.',
            (ToolStep('read_file', path, result),),
            f'{path} imports logging and {name}, and sets up a logger.',
        )
    if choice == 1:
        symbol = draw.fresh(lambda rng: f'{rng.choice(_SYMBOLS)}_v{rng.randint(2, 99)}')
        line = draw.random.randint(10, 400)
        return ScriptedTurn(
            f'Where is {symbol} defined?',
            (ToolStep('grep', symbol, f'{path}:{line}: def {symbol}(self, *args, **kwargs):'),),
            f'{symbol} is defined in {path}, line {line}.',
        )
    return ScriptedTurn(
        f'Thanks. Leave a TODO in {path} about the flaky CI run.',
        (),
        f'Done: {path} has the TODO now.',
    )


CODING = Domain(
    name='coding',
    system_prompt=(
        "You are a coding assistant working in the user's repository. Read files, search the code and run the "
        'tests with your tools, and remember the files, decisions and errors of the session.'
    ),
    thing='component',
    items=_COMPONENTS,
    kinds={
        'file': KindSpec(
            'file',
            'Which file holds the {item}?',
            'lives in',
            'I found it: the {item} lives in {value}, we will edit it later.',
            'Got it, the {item} is in that file.',
            lambda draw: draw.fresh(lambda rng: _path(rng, 2, 99)),
            correction='We moved the {item}: it lives in {value} now.',
        ),
        'decision': KindSpec(
            'request cap',
            'What request cap a minute did we decide on for the {item}?',
            'cap minute',
            'Decided: we cap the {item} at {value} a minute.',
            'Agreed, the {item} gets that cap.',
            lambda draw: draw.unique('{} requests', 1000, 9999),
            correction='Change of plan for the {item}: cap it at {value} a minute instead.',
        ),
        'library': KindSpec(
            'library',
            'Which library did we settle on for the {item}?',
            'library',
            'For the {item} we settled on the {value} library, and no other dependency.',
            'Fine, the {item} will use that library.',
            lambda draw: draw.fresh(lambda rng: rng.choice(_LIBRARIES)),
        ),
        'error': KindSpec(
            'failing test',
            'Which test failed when the tests of the {item} ran?',
            'failed',
            'Run the tests of the {item}, please.',
            'The tests of the {item} fail: one test raised {error}, I will look into it.',
            lambda draw: draw.fresh(lambda rng: f'test_{rng.choice(_CASES)}_{rng.randint(10, 999)}'),
            tool=('run_tests', 'Tests of the {item}: FAILED {value} - {error}, 1 failed, 11 passed in 0.4s'),
        ),
    },
    tools=(
        ToolSpec('read_file', 'path', "A file of the repository, with its lines' numbers."),
        ToolSpec('grep', 'pattern', 'Where the code says a word.'),
        ToolSpec('run_tests', 'component', "Run a component's tests."),
    ),
    filler=_coding_filler,
    extras=lambda draw: {'error': draw.random.choice(_ERRORS)},
    updated='Noted: the {item} has your change.',
)

DOMAINS = {domain.name: domain for domain in (SUPPORT, CODING)}
"""The domains by name, as `evaluate_retention(domain=...)` and `session-store eval --domain` take them."""
