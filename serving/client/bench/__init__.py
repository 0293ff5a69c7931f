"""`llmctl bench`: load generation and measurement against OpenAI-compatible endpoints.

Modules: ``tokens`` (token counting), ``prompts`` (sized prompts from the shipped corpus),
``wire`` (HTTP/1.1 connections that stamp every read), ``client`` (one streamed request),
``loadgen`` (closed and open loop), ``metrics``
(definitions and statistics), ``report`` (files and tables), ``plots``, ``compare``, ``runner``
(a whole run or sweep) and ``testserver`` (a fake server with known timings).
"""
