from django.urls import path

from chat import api, views

urlpatterns = [
    path("chat/", views.conversation_list, name="chat_list"),
    path("chat/new/", views.conversation_new, name="chat_new"),
    path("chat/<int:pk>/", views.chat_view, name="chat_view"),
    path("chat/<int:pk>/rename/", views.conversation_rename, name="chat_rename"),
    path("chat/<int:pk>/delete/", views.conversation_delete, name="chat_delete"),
    path("account/provider-keys/", views.provider_keys, name="provider_keys"),
    path("api/conversations/", api.conversations, name="api_conversations"),
    path("api/conversations/<int:pk>/", api.conversation_detail, name="api_conversation"),
    path("api/conversations/<int:pk>/messages/", api.post_message, name="api_post_message"),
    path("api/conversations/<int:pk>/stop/", api.stop, name="api_stop"),
    path("api/conversations/<int:pk>/llm-messages/", api.llm_messages, name="api_llm_messages"),
    path("api/turns/<int:pk>/", api.turn_detail, name="api_turn"),
]
