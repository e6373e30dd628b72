"""One process's share of a long stored conversation, for the restart test.

    python -m tests._conversation_worker URL FIRST_TURN END_TURN OUT.json

Opens the store, runs turns `FIRST_TURN..END_TURN-1` through a summarizing session, then probes
what the next request would be by running turn `END_TURN` with a model that records its first
request and fails, so the probe stores nothing. Writes what happened to OUT.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel

from processors import SummarizationProcessor
from session_store import SessionStore
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, Stop, scripted_agent, shape

SESSION_ID = 'long-conversation'
SCOPE = 'user-7'


async def main(url: str, first: int, end: int, out: str) -> None:
    summarizer = RecordingSummarizer()
    processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 30), keep=('messages', 10))
    assistant = ParallelToolAssistant()
    report: dict[str, Any] = {'runs': []}
    async with SessionStore(url, processor=processor) as store:
        session = await store.session(SESSION_ID, scope=SCOPE)
        report['summarizer_calls_at_open'] = len(summarizer.inputs)
        agent = scripted_agent(assistant)
        for turn in range(first, end):
            if turn == first:
                calls_before = len(summarizer.inputs)
            result = await session.run(agent, f'Turn M{turn} please')
            if turn == first:
                report['first_request'] = shape(assistant.requests[0])
                report['first_request_summarizer_calls'] = len(summarizer.inputs) - calls_before
            report['runs'].append(ModelMessagesTypeAdapter.dump_python(result.new_messages(), mode='json'))
        report['summarizer_inputs'] = list(summarizer.inputs)

        probe_calls = len(summarizer.inputs)
        probe = ParallelToolAssistant(fail_after=1)
        with contextlib.suppress(Stop):
            await session.run(scripted_agent(probe), f'Turn M{end} please')
        report['probe_request'] = shape(probe.requests[0])
        report['probe_summarizer_calls'] = len(summarizer.inputs) - probe_calls
    with open(out, 'w') as file:
        json.dump(report, file)


if __name__ == '__main__':
    url, first, end, out = sys.argv[1:]
    asyncio.run(main(url, int(first), int(end), out))
