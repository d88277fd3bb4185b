from django.urls import path

from qa import views

app_name = "qa"
urlpatterns = [
    path("", views.bank_list, name="bank_list"),
    path("search/", views.question_search, name="search"),
    path("<slug:slug>/", views.bank_detail, name="bank_detail"),
]
