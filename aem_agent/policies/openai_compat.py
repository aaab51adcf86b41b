"""A policy served by an OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, ...).

Standard library only (urllib and a thread pool): the endpoint does the heavy lifting, and
the harness should not need an SDK to talk to a local vLLM server. Requests of a batch run
concurrently; transient failures (5xx, 429, dropped connections, timeouts) are retried with
exponential backoff, while a request the server rejects (other 4xx) fails at once.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_agent.prompts import build_messages
from aem_envs.core.errors import AEMError

#: Statuses worth retrying: the server is overloaded, restarting or rate-limiting us.
RETRY_STATUSES = frozenset({408, 409, 429})


class EndpointError(AEMError):
    """The chat endpoint refused a request or could not be reached."""


class _Transient(Exception):
    """A failure a later attempt may not meet (server error, connection trouble)."""


class OpenAIPolicy(Policy):
    """Asks ``model`` at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``) for each reply.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (local servers usually need none);
    ``concurrency`` bounds the requests in flight; ``retries`` is how many times a transient
    failure is retried, waiting ``backoff * 2**attempt`` seconds before each retry.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 512,
        temperature: float = 0.7,
        concurrency: int = 8,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 1.0,
        seed: int | None = None,
        history_window: int = 5,
        system_prompt: str | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise AEMError(
                f"base URL {base_url!r} must start with http:// or https:// "
                f"(e.g. http://127.0.0.1:8000/v1)"
            )
        if concurrency < 1 or retries < 0:
            raise ValueError(
                f"need concurrency >= 1 and retries >= 0, got {concurrency}, {retries}"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.history_window, self.system_prompt = history_window, system_prompt
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="aem-openai")

    def act(self, inputs: Sequence[PolicyInput]) -> list[PolicyOutput]:
        return list(self._pool.map(self._reply, inputs))

    def _reply(self, inp: PolicyInput) -> PolicyOutput:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(
                inp, history_window=self.history_window, system_prompt=self.system_prompt
            ),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        answer = self._post(body)
        try:
            reply = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError(
                f"{self.url} answered without choices[0].message.content: {str(answer)[:300]}"
            ) from exc
        usage = answer.get("usage") or {}
        return PolicyOutput(
            reply=reply,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            extra={"finish_reason": answer["choices"][0].get("finish_reason")},
        )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body``, retrying transient failures; the parsed JSON answer."""
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self._send(urllib.request.Request(self.url, data, headers, method="POST"))
            except _Transient as exc:
                last = str(exc)
        raise EndpointError(
            f"{self.url} did not answer after {self.retries + 1} attempt(s) ({last}); "
            f"check that the server runs and the base URL is right"
        )

    def _send(self, request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            if exc.code >= 500 or exc.code in RETRY_STATUSES:
                raise _Transient(f"HTTP {exc.code}: {detail}") from exc
            raise EndpointError(
                f"{self.url} rejected the request for model {self.model!r} with HTTP "
                f"{exc.code}: {detail}"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
            raise _Transient(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EndpointError(f"{self.url} answered with non-JSON: {raw[:300]!r}") from exc

    def close(self) -> None:
        self._pool.shutdown(wait=True)
