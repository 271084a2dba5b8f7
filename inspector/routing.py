"""WebSocket routes of every app, in one list for the ASGI application."""

from chat.routing import websocket_urlpatterns as chat_ws
from tools.routing import websocket_urlpatterns as tools_ws

websocket_urlpatterns = [*chat_ws, *tools_ws]
