from django.urls import path

from tools import api, views, widgets

urlpatterns = [
    path("servers/", views.server_list, name="server_list"),
    path("servers/new/", views.server_new, name="server_new"),
    path("servers/import/", views.servers_import_page, name="servers_import"),
    path("servers/<int:pk>/", views.server_detail, name="server_detail"),
    path("servers/<int:pk>/edit/", views.server_edit, name="server_edit"),
    path("servers/<int:pk>/delete/", views.server_delete, name="server_delete"),
    path("servers/<int:pk>/toggle/", views.server_toggle, name="server_toggle"),
    path("servers/<int:pk>/test/", views.server_test, name="server_test"),
    path("servers/<int:pk>/tools/<str:name>/", views.tool_detail, name="tool_detail"),
    path("servers/<int:pk>/resources/", views.resources, name="server_resources"),
    path("servers/<int:pk>/resources/download/", views.resource_download, name="resource_download"),
    path("servers/<int:pk>/prompts/", views.prompts, name="server_prompts"),
    path("rpc-log/", views.rpc_log, name="rpc_log"),
    path("rpc-log/export/", views.rpc_log_export, name="rpc_log_export"),
    # JSON API
    path("api/servers/", api.servers, name="api_servers"),
    path("api/servers/import/", api.servers_import, name="api_servers_import"),
    path("api/servers/export/", api.servers_export, name="api_servers_export"),
    path("api/servers/<int:pk>/", api.server_detail, name="api_server"),
    path("api/servers/<int:pk>/refresh/", api.server_refresh, name="api_server_refresh"),
    path("api/servers/<int:pk>/tools/", api.server_tools, name="api_server_tools"),
    path("api/servers/<int:pk>/tools/<str:name>/call/", api.tool_call_create, name="api_tool_call_create"),
    path("api/servers/<int:pk>/tools/<path:name>/view/", widgets.tool_view, name="api_tool_view"),
    path("api/tool-calls/<uuid:pk>/", api.tool_call_detail, name="api_tool_call"),
    path("api/tool-calls/<uuid:pk>/replay/", api.tool_call_replay, name="api_tool_call_replay"),
    path("api/tool-calls/<uuid:pk>/view/", widgets.view, name="api_tool_call_view"),
    path("api/tool-calls/<uuid:pk>/widget/tools-call/", widgets.tools_call, name="api_widget_tools_call"),
    path("api/tool-calls/<uuid:pk>/widget/resources-read/", widgets.resources_read, name="api_widget_resources_read"),
    path("api/tool-calls/<uuid:pk>/widget/model-context/", widgets.model_context, name="api_widget_model_context"),
]
