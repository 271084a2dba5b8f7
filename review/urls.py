from django.urls import path

from review import loadtest_views, views

urlpatterns = [
    path("servers/<int:pk>/review/", views.server_review, name="server_review"),
    path("servers/<int:pk>/review/diff/", views.surface_diff_page, name="surface_diff"),
    path("servers/<int:pk>/review/approve/", views.approve, name="surface_approve"),
    path("servers/<int:pk>/review/withhold/", views.withhold, name="surface_withhold"),
    path("servers/<int:pk>/load-tests/new/", loadtest_views.start, name="loadtest_start"),
    path("load-tests/<uuid:pk>/", loadtest_views.run_page, name="loadtest_run"),
    path("load-tests/<uuid:pk>/cancel/", loadtest_views.cancel, name="loadtest_cancel"),
    path("api/load-tests/<uuid:pk>/", loadtest_views.run_json, name="api_loadtest_run"),
]
