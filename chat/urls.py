from django.urls import path

from chat import api, view_context, views

urlpatterns = [
    path("chat/", views.conversation_list, name="chat_list"),
    path("chat/new/", views.conversation_new, name="chat_new"),
    path("chat/<int:pk>/", views.chat_view, name="chat_view"),
    path("chat/<int:pk>/rename/", views.conversation_rename, name="chat_rename"),
    path("chat/<int:pk>/delete/", views.conversation_delete, name="chat_delete"),
    path("chat/<int:pk>/share/", views.conversation_share, name="chat_share"),
    path("account/provider-keys/", views.provider_keys, name="provider_keys"),
    path("api/conversations/", api.conversations, name="api_conversations"),
    # An App view's ui/update-model-context (chat/view_context.py); the view's other requests are tools/urls.py's.
    path("api/tool-calls/<uuid:pk>/widget/model-context/", view_context.model_context, name="api_widget_model_context"),
    path("api/tool-calls/<uuid:pk>/widget/view-tools/", view_context.view_tools, name="api_widget_view_tools"),
    path("api/conversations/<int:pk>/", api.conversation_detail, name="api_conversation"),
    path("api/conversations/<int:pk>/messages/", api.post_message, name="api_post_message"),
    path("api/conversations/<int:pk>/stop/", api.stop, name="api_stop"),
    path("api/conversations/<int:pk>/llm-messages/", api.llm_messages, name="api_llm_messages"),
    path("api/turns/<int:pk>/", api.turn_detail, name="api_turn"),
    path("api/conversations/import/", api.import_conversation, name="api_conversation_import"),
    path("api/conversations/<int:pk>/export/", api.export, name="api_conversation_export"),
    path("api/conversations/<int:pk>/replays/", api.replays, name="api_replays"),
    path("api/conversations/<int:pk>/player/", api.player, name="api_player"),
    path("api/conversations/<int:pk>/player/views/<uuid:call_id>/", api.player_view, name="api_player_view"),
    path("api/replays/<int:pk>/", api.replay_detail, name="api_replay"),
    path("chat/import/", views.conversation_import, name="chat_import"),
    path("chat/<int:pk>/replay/", views.player, name="chat_player"),
    path("chat/<int:pk>/replays/", views.replays, name="chat_replays"),
    path("chat/replays/<int:pk>/", views.replay_run, name="chat_replay_run"),
]
