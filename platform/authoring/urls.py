from django.urls import path

from authoring import bank_views, views

app_name = "authoring"
urlpatterns = [
    path("", views.index, name="index"),
    path("new/", views.exercise_new, name="new"),
    path("import/", views.exercise_import, name="import"),
    path("preview/", views.preview, name="preview"),
    path("exercises/<slug:slug>/", views.draft, name="draft"),
    path("exercises/<slug:slug>/edit/", views.draft_start, name="draft_start"),
    path("exercises/<slug:slug>/details/", views.details, name="details"),
    path("exercises/<slug:slug>/add-file/", views.file_add, name="file_add"),
    path("exercises/<slug:slug>/files/<path:path>", views.file_edit, name="file"),
    path("exercises/<slug:slug>/delete-file/<path:path>", views.file_delete, name="file_delete"),
    path("exercises/<slug:slug>/validate/", views.validate, name="validate"),
    path("exercises/<slug:slug>/validations/<int:pk>/", views.validation_status,
         name="validation"),
    path("exercises/<slug:slug>/publish/", views.publish, name="publish"),
    path("exercises/<slug:slug>/discard/", views.discard, name="discard"),
    path("exercises/<slug:slug>/history/", views.history, name="history"),
    path("exercises/<slug:slug>/diff/", views.diff, name="diff"),
    path("exercises/<slug:slug>/export/", views.export, name="export"),
    path("banks/", bank_views.bank_list, name="bank_list"),
    path("banks/new/", bank_views.bank_new, name="bank_new"),
    path("banks/<slug:slug>/", bank_views.bank_detail, name="bank_detail"),
    path("banks/<slug:slug>/export/", bank_views.bank_export, name="bank_export"),
    path("banks/<slug:slug>/new/<str:kind>/", bank_views.question_new, name="question_new"),
    path("banks/<slug:slug>/q/<slug:key>/", bank_views.question_edit, name="question_edit"),
    path("banks/<slug:slug>/q/<slug:key>/retire/", bank_views.question_retire,
         name="question_retire"),
]
