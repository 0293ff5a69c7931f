"""Properties of the overload guard's admission (`serving/common/overload.py`), for any arrivals.

The rules, from the module's docstring: a generation request takes one of `slots` places; up to
`queue` more wait for one; beyond that the answer is 429 at once; while draining, new requests and
those still waiting get 503; a slot is held until the response is sent. So for any slots and queue
bound and any sequence of arrivals, completions and a drain:

- in flight never exceeds the slots, waiting never exceeds the queue bound (and the gauges say so);
- a request is refused with 429 only when every slot is taken and the queue is full, and a waiting
  request takes a slot as soon as one is free (no slot stays idle while one waits);
- every request gets an answer: a slot, 429 or 503, and none is left waiting at the end;
- a drain answers every waiting request at once, and after it nothing more is admitted.

Driven directly on one event loop, as test_admission.py does (its helpers).
"""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st
from test_admission import admission, gauges, run, settle

from llmctl.serving.common.overload import Refused

step_st = st.one_of(
    st.just(("arrive", 0)),
    st.integers(0, 7).map(lambda n: ("finish", n)),
    st.just(("drain", 0)),
)


@given(st.integers(1, 3), st.integers(0, 3), st.lists(step_st, max_size=25))
def test_slots_and_queue_bounds_hold_and_every_request_is_answered(
    slots: int, queue: int, steps: list[tuple[str, int]]
) -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=slots, queue=queue)
        answers: dict[int, str] = {}
        done: dict[int, asyncio.Event] = {}
        tasks = []

        async def request(n: int) -> None:
            try:
                await adm.enter()
            except Refused as refused:
                answers[n] = str(refused.error.status)
                return
            answers[n] = "slot"
            await done[n].wait()
            await adm.leave()
            answers[n] = "done"

        drained = False
        for kind, index in steps:
            if kind == "arrive":
                n = len(done)
                done[n] = asyncio.Event()
                full = adm.active >= slots and adm.waiting >= queue
                tasks.append(asyncio.create_task(request(n)))
                await settle()
                if drained:
                    assert answers[n] == "503"
                elif full:
                    assert answers[n] == "429"
                else:
                    assert answers.get(n) in (None, "slot")
            elif kind == "finish":
                holding = [n for n, a in answers.items() if a == "slot"]
                if holding:
                    done[holding[index % len(holding)]].set()
            elif not drained:  # a stopping replica: no grace, what is in flight ends at the end
                drained = True
                tasks.append(asyncio.create_task(adm.drain(grace_s=0)))
            await settle()
            assert 0 <= adm.active <= slots and 0 <= adm.waiting <= queue
            assert gauges(adm) == (adm.active, adm.waiting)
            if not drained:
                assert adm.waiting == 0 or adm.active == slots  # no idle slot while one waits
            else:
                assert adm.waiting == 0  # a drain answers the waiting requests at once (503)
        for event in done.values():
            event.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert adm.active == 0 and adm.waiting == 0
        assert set(answers) == set(done) and set(answers.values()) <= {"done", "429", "503"}

    run(scenario())
