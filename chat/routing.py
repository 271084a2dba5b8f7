from django.urls import path

from chat import consumers

websocket_urlpatterns = [
    path("ws/conversations/<int:pk>/", consumers.ConversationConsumer.as_asgi()),
]
