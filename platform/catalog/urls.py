from django.urls import path

from catalog import views

app_name = "catalog"
urlpatterns = [
    path("", views.exercise_list, name="exercise_list"),
    path("<slug:slug>/", views.exercise_detail, name="exercise_detail"),
    path("<slug:slug>/v<int:number>/", views.exercise_detail, name="exercise_version"),
    path("<slug:slug>/v<int:number>/hints/<int:index>/", views.exercise_hint, name="exercise_hint"),
]
