"""/docs: Swagger UI served from the `fastapi-offline` package's bundled assets, never a CDN.

Production hosts here have no internet access; FastAPI's default page loads its JavaScript and
CSS from jsdelivr and is blank there. The assets come from an installed distribution (a
dependency in pyproject.toml), not a copy in this repository.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
ASSETS = files("fastapi_offline") / "static"
#: Swagger UI's online validator badge is an image from validator.swagger.io on any host but localhost.
SWAGGER_PARAMETERS = {"validatorUrl": None}


def install(api: FastAPI) -> None:
    """Mount the assets and add the page (the app must be built with docs_url=None)."""
    api.mount(ASSETS_PATH, StaticFiles(directory=str(ASSETS)), name="docs-assets")

    @api.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}{api.openapi_url}", title=f"{api.title} - API docs",
                                   swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
                                   swagger_ui_parameters=SWAGGER_PARAMETERS)
