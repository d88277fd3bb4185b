from django.urls import path

from realtime import consumers

websocket_urlpatterns = [
    path("ws/c/<str:token>/", consumers.CandidatePadConsumer.as_asgi()),
    path("ws/sessions/<int:pk>/", consumers.InterviewerPadConsumer.as_asgi()),
]
