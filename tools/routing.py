from django.urls import path

from tools import consumers

websocket_urlpatterns = [
    path("ws/rpc-log/", consumers.RpcLogConsumer.as_asgi()),
    path("ws/servers/<int:pk>/", consumers.ServerConsumer.as_asgi()),
    path("ws/tool-calls/<uuid:pk>/", consumers.ToolCallConsumer.as_asgi()),
    path("ws/calls/", consumers.CallsConsumer.as_asgi()),
]
