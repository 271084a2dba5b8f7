"""Chat pages: conversation list, new conversation, the chat view, and provider keys."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from chat.models import Conversation, ProviderKey
from tools.models import Server


class ConversationForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key",
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Optional; stored encrypted for this conversation and never shown again.",
    )

    class Meta:
        model = Conversation
        fields = ["model", "api_base", "api_key", "servers", "system_prompt", "temperature"]
        widgets = {"servers": forms.CheckboxSelectMultiple, "system_prompt": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["servers"].queryset = Server.objects.visible_to(user).filter(enabled=True)
        self.fields["model"].widget.attrs["placeholder"] = "openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3…"

    def clean_temperature(self):
        t = self.cleaned_data.get("temperature")
        if t is not None and not 0 <= t <= 2:
            raise forms.ValidationError("Between 0 and 2.")
        return t


def conversation_list(request: HttpRequest) -> HttpResponse:
    qs = Conversation.objects.filter(owner=request.user).order_by("-updated_at")
    q = request.GET.get("q", "").strip()
    if q:
        qs = qs.filter(Q(title__icontains=q) | Q(messages__text__icontains=q)).distinct()
    return render(request, "chat/list.html", {"conversations": qs[:200], "q": q})


def conversation_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = ConversationForm(request.POST, user=request.user)
        if form.is_valid():
            conversation = form.save(commit=False)
            conversation.owner = request.user
            conversation.save()
            form.save_m2m()
            return redirect("chat_view", pk=conversation.pk)
    else:
        last = Conversation.objects.filter(owner=request.user).order_by("-created_at").first()
        initial = {"model": last.model, "api_base": last.api_base} if last else {}
        form = ConversationForm(user=request.user, initial=initial)
    return render(request, "chat/new.html", {"form": form})


def chat_view(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = get_object_or_404(Conversation.objects.prefetch_related("servers"), pk=pk, owner=request.user)
    return render(
        request,
        "chat/chat.html",
        {
            "conversation": conversation,
            "page_data": {
                "conversationId": conversation.pk,
                "sandboxOrigin": settings.SANDBOX_ORIGIN,
                "sandboxUrl": f"{settings.SANDBOX_ORIGIN}/sandbox/proxy/",
            },
        },
    )


@require_POST
def conversation_rename(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = get_object_or_404(Conversation, pk=pk, owner=request.user)
    conversation.title = request.POST.get("title", "").strip()[:200]
    conversation.save(update_fields=["title", "updated_at"])
    return redirect("chat_view", pk=pk)


@require_POST
def conversation_delete(request: HttpRequest, pk: int) -> HttpResponse:
    get_object_or_404(Conversation, pk=pk, owner=request.user).delete()
    messages.success(request, "Conversation deleted.")
    return redirect("chat_list")


def provider_keys(request: HttpRequest) -> HttpResponse:
    """Saved provider keys: write-only. The page shows which providers have a key, masked."""
    if request.method == "POST":
        provider = request.POST.get("provider", "").strip().lower()
        key = request.POST.get("api_key", "").strip()
        if request.POST.get("delete"):
            ProviderKey.objects.filter(user=request.user, provider=provider).delete()
            messages.success(request, f"Removed the key for {provider}.")
        elif not provider or not key:
            messages.error(request, "Give both a provider (e.g. openai) and a key.")
        else:
            ProviderKey.objects.update_or_create(user=request.user, provider=provider, defaults={"api_key": key})
            messages.success(request, f"Saved the key for {provider}.")
        return redirect("provider_keys")
    keys = ProviderKey.objects.filter(user=request.user).order_by("provider")
    return render(request, "chat/keys.html", {"keys": keys})
