"""The shared OpenAI-compatible FastAPI app, written once against the :class:`Engine` protocol.

Routes: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions`` (streamed
and not), ``GET /infer?sentence=`` (the seeds' plain-text route), ``GET /healthz`` and
``GET /metrics``. With an API key (the ``api_key`` argument or ``$LLMCTL_API_KEY``) every route
but ``/healthz`` needs ``Authorization: Bearer <key>`` (see :mod:`.auth`). Every check that can fail (model name, limits, stop sequences) runs before the
response starts, so a bad request gets a 4xx with an OpenAI error body and never a half stream.
Request size, the bounded queue and draining are checked before the body is parsed
(:mod:`.overload`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from llmctl.serving.common import protocol as p
from llmctl.serving.common import sse
from llmctl.serving.common.auth import BearerAuth, resolve_api_key
from llmctl.serving.common.engine import Engine, SamplingParams
from llmctl.serving.common.limits import Limits, single_choice, stop_list
from llmctl.serving.common.metrics import Metrics
from llmctl.serving.common.overload import Admission, OverloadConfig, OverloadGuard
from llmctl.serving.common.stop import StopMatcher


@dataclass
class _Tally:
    prompt: int
    completion: int = 0
    finish: p.FinishReason = "stop"
    started: float = field(default_factory=time.perf_counter)
    first: float | None = None

    def usage(self) -> p.Usage:
        return p.Usage(
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            total_tokens=self.prompt + self.completion,
        )


@dataclass(frozen=True)
class _Job:
    prompt_ids: list[int]
    params: SamplingParams
    stops: list[str]


class OpenAIService:
    """Request handling shared by every route; one per replica."""

    def __init__(self, engine: Engine, limits: Limits, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.limits = limits
        self.metrics = metrics or Metrics(engine.model_id)
        self.created = p.now()

    def check_model(self, name: str) -> None:
        if name != self.engine.model_id:
            raise p.APIError(
                404,
                f"the model {name!r} does not exist; this endpoint serves {self.engine.model_id!r}",
                param="model",
                code="model_not_found",
            )

    def job(self, req: p.ChatCompletionRequest | p.CompletionRequest, prompt_ids: list[int]) -> _Job:
        single_choice(req.n)
        stops = stop_list(req.stop)
        requested = req.max_completion_tokens if isinstance(req, p.ChatCompletionRequest) else None
        requested = req.max_tokens if req.max_tokens is not None else requested
        max_tokens = self.limits.max_tokens(requested, len(prompt_ids))
        params = SamplingParams(
            max_tokens=max_tokens, temperature=req.temperature, top_p=req.top_p, seed=req.seed
        )
        return _Job(prompt_ids, params, stops)

    def chat_job(self, req: p.ChatCompletionRequest) -> _Job:
        self.check_model(req.model)
        messages = [{"role": m.role, "content": m.text()} for m in req.messages]
        return self.job(req, self.engine.chat_prompt(messages))

    def completion_job(self, req: p.CompletionRequest) -> _Job:
        self.check_model(req.model)
        if isinstance(req.prompt, list):
            if len(req.prompt) != 1:
                raise p.APIError(
                    400, "prompt must be one string (batched prompts are not supported)", param="prompt"
                )
            prompt = req.prompt[0]
        else:
            prompt = req.prompt
        return self.job(req, self.engine.encode(prompt))

    async def pieces(self, job: _Job, tally: _Tally) -> AsyncIterator[str]:
        """Text pieces of one generation, with stop sequences applied; fills ``tally``."""
        matcher = StopMatcher(job.stops)
        self.metrics.in_flight.labels(self.metrics.model).inc()
        try:
            async with contextlib.aclosing(self.engine.generate(job.prompt_ids, job.params)) as deltas:
                async for delta in deltas:
                    if tally.first is None and delta.tokens:
                        tally.first = time.perf_counter()
                    tally.completion += delta.tokens
                    text = matcher.feed(delta.text)
                    if text:
                        yield text
                    if matcher.stopped:
                        tally.finish = "stop"
                        return
                    if delta.finish_reason is not None:
                        tally.finish = delta.finish_reason
                        break
            rest = matcher.flush()
            if rest:
                yield rest
        finally:
            self.metrics.in_flight.labels(self.metrics.model).dec()
            end = time.perf_counter()
            ttft = None if tally.first is None else tally.first - tally.started
            self.metrics.generation(ttft, end - (tally.first or end), tally.prompt, tally.completion)

    async def text(self, job: _Job) -> tuple[str, _Tally]:
        tally = _Tally(prompt=len(job.prompt_ids))
        parts = [piece async for piece in self.pieces(job, tally)]
        return "".join(parts), tally


def _error_response(error: p.APIError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def _validation_message(error: RequestValidationError) -> tuple[str, str | None]:
    problems = []
    param = None
    for item in error.errors():
        loc = [str(part) for part in item.get("loc", ()) if part != "body"]
        param = param or (".".join(loc) or None)
        problems.append(f"{'.'.join(loc) or 'body'}: {item.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(problems), param


def build_app(
    engine: Engine,
    limits: Limits,
    *,
    metrics: Metrics | None = None,
    api_key: str | None = None,
    overload: OverloadConfig | None = None,
) -> FastAPI:
    """The FastAPI app serving ``engine`` (plain uvicorn, or Ray Serve via :mod:`.ingress`).

    ``api_key`` (default: ``$LLMCTL_API_KEY``) turns on bearer-key checks for every route but
    ``/healthz``. ``overload`` sets the size limit, slots, queue and drain grace (default: only a
    size limit derived from the context length); ``app.state.admission.drain()`` drains.
    """
    service = OpenAIService(engine, limits, metrics)
    config = overload or OverloadConfig.for_context(limits.max_context)
    admission = Admission(config, service.metrics, engine.abort_all)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        watcher = asyncio.create_task(admission.watch(config.drain_file)) if config.drain_file else None
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()

    app = FastAPI(title="llmctl OpenAI-compatible server", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.service = service
    app.state.admission = admission
    app.add_middleware(OverloadGuard, admission=admission)
    key = resolve_api_key(api_key)
    if key:
        app.add_middleware(BearerAuth, api_key=key)

    @app.exception_handler(p.APIError)
    async def _api_error(request: Request, error: p.APIError) -> JSONResponse:
        service.metrics.request(request.url.path, error.status)
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(error)
        service.metrics.request(request.url.path, 400)
        return _error_response(p.APIError(400, message, param=param, code="invalid_value"))

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        ok = engine.healthy()
        status = "draining" if admission.draining else "ok" if ok else "failed"
        return JSONResponse(
            {"status": status, "model": engine.model_id}, status_code=200 if status == "ok" else 503
        )

    @app.get("/metrics")
    async def metrics_route() -> Response:
        return Response(service.metrics.render(), media_type=service.metrics.content_type)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        service.metrics.request("/v1/models", 200)
        return p.model_list(engine.model_id, service.created, limits.max_context)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: p.ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        job = service.chat_job(req)
        rid, created = p.new_id("chatcmpl"), p.now()
        service.metrics.request("/v1/chat/completions", 200)
        if not req.stream:
            text, tally = await service.text(job)
            return JSONResponse(p.chat_completion(rid, created, req.model, text, tally.finish, tally.usage()))
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        async def events() -> AsyncIterator[bytes]:
            tally = _Tally(prompt=len(job.prompt_ids))
            yield sse.event(p.chat_chunk(rid, created, req.model, {"role": "assistant", "content": ""}))
            try:
                async for piece in service.pieces(job, tally):
                    yield sse.event(p.chat_chunk(rid, created, req.model, {"content": piece}))
            except p.APIError as error:
                yield sse.event(error.body())
                yield sse.DONE
                return
            yield sse.event(p.chat_chunk(rid, created, req.model, {}, tally.finish))
            if include_usage:
                yield sse.event(
                    p.usage_chunk(rid, created, req.model, "chat.completion.chunk", tally.usage())
                )
            yield sse.DONE

        return StreamingResponse(events(), media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)

    @app.post("/v1/completions", response_model=None)
    async def completions(req: p.CompletionRequest) -> JSONResponse | StreamingResponse:
        job = service.completion_job(req)
        prefix = req.prompt if isinstance(req.prompt, str) else req.prompt[0]
        prefix = prefix if req.echo else ""
        rid, created = p.new_id("cmpl"), p.now()
        service.metrics.request("/v1/completions", 200)
        if not req.stream:
            text, tally = await service.text(job)
            return JSONResponse(
                p.completion(rid, created, req.model, prefix + text, tally.finish, tally.usage())
            )
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        async def events() -> AsyncIterator[bytes]:
            tally = _Tally(prompt=len(job.prompt_ids))
            if prefix:
                yield sse.event(p.completion(rid, created, req.model, prefix, None))
            try:
                async for piece in service.pieces(job, tally):
                    yield sse.event(p.completion(rid, created, req.model, piece, None))
            except p.APIError as error:
                yield sse.event(error.body())
                yield sse.DONE
                return
            yield sse.event(p.completion(rid, created, req.model, "", tally.finish))
            if include_usage:
                yield sse.event(p.usage_chunk(rid, created, req.model, "text_completion", tally.usage()))
            yield sse.DONE

        return StreamingResponse(events(), media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)

    @app.get("/infer", response_class=PlainTextResponse)
    async def infer(sentence: str = Query(min_length=1, description="The prompt.")) -> PlainTextResponse:
        messages = [{"role": "user", "content": sentence}]
        ids = engine.chat_prompt(messages) if engine.has_chat_template else engine.encode(sentence)
        job = _Job(ids, SamplingParams(max_tokens=limits.max_tokens(None, len(ids))), [])
        text, _ = await service.text(job)
        service.metrics.request("/infer", 200)
        return PlainTextResponse(text)

    return app
