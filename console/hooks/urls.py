from django.urls import path

from console.hooks import views

urlpatterns = [path("<str:webhook_id>", views.deliver, name="hook-deliver")]
