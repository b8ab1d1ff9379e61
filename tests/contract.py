"""The API contract as tests check it: answers against the OpenAPI document the server serves.

:class:`Contract` validates an answer (its status, content type and JSON body) against the
operation of its route in ``GET /api/v1/openapi.json`` with ``jsonschema`` (draft 2020-12).
:func:`watch` makes a test server check every answer it sends under ``/api/v1`` and of
``/healthz`` and ``/readyz``; the ``make_server`` fixture does it for every test server and
fails the test at its end if one did not conform, so the whole REST suite checks the contract.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from server.web.http import PREFIX
from server.web.routes import openapi_document

#: The document's URI in the validators' registry.
DOCUMENT_URI = "urn:tripeaks:openapi"
#: The paths whose answers are checked.
CHECKED = re.compile(rf"^({re.escape(PREFIX)}/|/healthz$|/readyz$)")


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class Contract:
    """Checks answers against an OpenAPI document (by default the server's)."""

    document: dict[str, Any] = field(default_factory=openapi_document)

    def __post_init__(self) -> None:
        resource = Resource.from_contents(self.document, default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(DOCUMENT_URI, resource)
        self._validators: dict[str, Draft202012Validator] = {}
        self._templates = [
            (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"), path)
            for path in self.document["paths"]
        ]

    def template(self, path: str) -> str | None:
        """The document's path template that ``path`` matches, if any."""
        return next(
            (template for pattern, template in self._templates if pattern.match(path)), None
        )

    def operation(self, method: str, template: str) -> dict[str, Any] | None:
        """The operation of ``method`` on ``template`` (a GET's for a HEAD)."""
        item = self.document["paths"].get(template, {})
        op: dict[str, Any] | None = item.get(method.lower()) or (
            item.get("get") if method.upper() == "HEAD" else None
        )
        return op

    def validator(self, pointer: str) -> Draft202012Validator:
        """A validator of the schema at ``pointer`` (a JSON pointer into the document)."""
        if pointer not in self._validators:
            self._validators[pointer] = Draft202012Validator(
                {"$ref": f"{DOCUMENT_URI}#{pointer}"},
                registry=self._registry,
                format_checker=Draft202012Validator.FORMAT_CHECKER,
            )
        return self._validators[pointer]

    def error_validator(self) -> Draft202012Validator:
        """A validator of the error body (answers outside any operation: 404, 405)."""
        return self.validator("/components/schemas/ErrorBody")

    def problems(
        self,
        method: str,
        path: str,
        status: int,
        content_type: str,
        body: bytes | None,
        template: str | None = None,
    ) -> list[str]:
        """What does not conform in an answer to ``method path`` (empty when it conforms).

        Args:
            method: the request's method.
            path: the request's path.
            status: the answer's status.
            content_type: the answer's media type (without parameters).
            body: the answer's body (None for the answer to a HEAD, which has none).
            template: the route's path template, when known (else matched from ``path``).
        """
        where = f"{method} {path} → {status}"
        template = template if template is not None else self.template(path)
        op = None if template is None else self.operation(method, template)
        if op is None:
            if not path.startswith(PREFIX + "/"):
                return []  # outside the API, only its operations are described
            if method.upper() != "GET" and template is not None and status != 405:
                return [f"{where}: {method} is not an operation of {template}"]
            if status not in (404, 405):
                return [f"{where}: no operation in the document answers {path}"]
            return self._body(where, content_type, body, self.error_validator())
        response = op["responses"].get(str(status))
        if response is None:
            return [f"{where}: {status} is not a documented answer of {template}"]
        content = response.get("content")
        if body is None:  # a HEAD
            return []
        if not content:
            return [] if not body else [f"{where}: a body where the document has none"]
        if content_type not in content:
            return [f"{where}: content type {content_type!r}, documented {sorted(content)}"]
        assert template is not None
        pointer = "/" + _pointer(
            "paths",
            template,
            method.lower(),
            "responses",
            str(status),
            "content",
            content_type,
            "schema",
        )
        return self._body(where, content_type, body, self.validator(pointer))

    def _body(
        self,
        where: str,
        content_type: str,
        body: bytes | None,
        validator: Draft202012Validator,
    ) -> list[str]:
        if body is None:
            return []
        if content_type != "application/json":
            return [f"{where}: content type {content_type!r}, not application/json"]
        try:
            data = json.loads(body)
        except ValueError as exc:
            return [f"{where}: the body is not JSON: {exc}"]
        return [
            f"{where}: {'/'.join(map(str, e.absolute_path)) or 'body'}: {e.message}"
            for e in validator.iter_errors(data)
        ]


#: The contract of the server's own document (made once).
CONTRACT = Contract()


@dataclass
class Watch:
    """What a watched server answered that does not conform."""

    problems: list[str] = field(default_factory=list)
    checked: int = 0


def watch(app: web.Application, contract: Contract = CONTRACT) -> Watch:
    """Check every answer ``app`` sends under ``/api/v1`` and of ``/healthz`` and
    ``/readyz`` against ``contract``; the returned :class:`Watch` collects what did not
    conform."""
    seen = Watch()

    async def check(request: web.Request, response: web.StreamResponse) -> None:
        if not CHECKED.match(request.path) or not isinstance(response, web.Response):
            return
        resource = request.match_info.route.resource
        template = None if resource is None else resource.canonical
        body = response.body
        if request.method == "HEAD":
            raw = None
        elif body is None or isinstance(body, bytes):
            raw = body or b""
        else:
            seen.problems.append(f"{request.method} {request.path}: a body that is not bytes")
            return
        seen.checked += 1
        seen.problems.extend(
            contract.problems(
                request.method,
                request.path,
                response.status,
                response.content_type,
                raw,
                template if template in contract.document["paths"] else None,
            )
        )

    app.on_response_prepare.append(check)
    return seen
