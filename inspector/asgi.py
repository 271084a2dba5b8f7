"""ASGI entry point: HTTP through Django (with static files), WebSockets through Channels."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from inspector.asgi_handler import OneHopASGIHandler  # noqa: E402  (needs Django set up)

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from inspector import tracing  # noqa: E402
from inspector.routing import websocket_urlpatterns  # noqa: E402

django_asgi_app = OneHopASGIHandler(keep_threads=settings.WEB_REQUEST_THREADS)

tracing.configure("web")  # exports spans only when OTEL_EXPORTER_OTLP_ENDPOINT is set

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        # Only pages of the app itself may open sockets: not the widget sandbox origin, whose
        # host name is also an allowed host.
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)), [settings.PUBLIC_URL]),
    }
)
