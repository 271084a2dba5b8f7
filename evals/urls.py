from django.urls import path

from evals import api, views

urlpatterns = [
    path("evals/", views.suite_list, name="evals_list"),
    path("evals/new/", views.suite_new, name="evals_suite_new"),
    path("evals/import/", views.suite_import, name="evals_import"),
    path("evals/side-by-side/", views.side_by_side_page, name="evals_side_by_side"),
    path("evals/compare/", views.run_compare, name="evals_compare"),
    path("evals/<int:pk>/", views.suite_detail, name="evals_suite"),
    path("evals/<int:pk>/edit/", views.suite_edit, name="evals_suite_edit"),
    path("evals/<int:pk>/delete/", views.suite_delete, name="evals_suite_delete"),
    path("evals/<int:pk>/export/", views.suite_export, name="evals_suite_export"),
    path("evals/<int:suite_pk>/cases/new/", views.case_edit, name="evals_case_new"),
    path("evals/cases/<int:pk>/", views.case_edit, name="evals_case"),
    path("evals/cases/<int:pk>/delete/", views.case_delete, name="evals_case_delete"),
    path("evals/from-conversation/<int:pk>/", views.case_from_conversation, name="evals_case_from_conversation"),
    path("evals/runs/<int:pk>/", views.run_detail, name="evals_run"),
    path("evals/runs/<int:pk>/cancel/", views.run_cancel, name="evals_run_cancel"),
    path("api/evals/suites/", api.suites, name="api_evals_suites"),
    path("api/evals/suites/import/", api.suite_import, name="api_evals_import"),
    path("api/evals/suites/<int:pk>/export/", api.suite_export, name="api_evals_export"),
    path("api/evals/suites/<int:pk>/runs/", api.start, name="api_evals_start"),
    path("api/evals/runs/<int:pk>/", api.run_detail, name="api_evals_run"),
    path("api/evals/runs/<int:pk>/cancel/", api.cancel, name="api_evals_cancel"),
]
