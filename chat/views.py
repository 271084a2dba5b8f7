"""Chat pages: conversation list, new conversation, the chat view, and provider keys."""

from __future__ import annotations

from collections import Counter

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat import settings_schema
from chat.models import Conversation, ProviderKey
from tools.mcp import url_secrets
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

    def clean(self):
        """The same rules as the API and an imported file: chat/settings_schema.py."""
        cleaned = super().clean()
        for field, problems in settings_schema.form_errors(cleaned).items():
            for problem in problems:
                self.add_error(field if field in self.fields else None, problem)
        return cleaned


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    qs = (Conversation.objects.visible_to(request.user).select_related("owner").prefetch_related("servers")
          .order_by("-updated_at"))
    q = request.GET.get("q", "").replace("\x00", "").strip()  # PostgreSQL refuses NUL in a query
    if q:
        qs = qs.filter(Q(title__icontains=q) | Q(messages__text__icontains=q)).distinct()
    conversations = list(qs[:200])
    # Chats are titled by their first message, so titles repeat: a repeated one gets its start time and number.
    titles = Counter(str(c) for c in conversations)
    for c in conversations:
        c.repeated_title = titles[str(c)] > 1
        # An imported conversation has no servers here; its file names the ones it used.
        c.server_names = sorted(s.name for s in c.servers.all()) or sorted(
            str(s.get("name")) for s in (c.imported or {}).get("servers") or [] if isinstance(s, dict) and s.get("name"))
    return render(request, "chat/list.html", {"conversations": conversations, "q": q})


@require_http_methods(["GET", "POST"])
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


@require_GET
def chat_view(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = get_object_or_404(Conversation.objects.visible_to(request.user).prefetch_related("servers"), pk=pk)
    if conversation.read_only or conversation.owner_id != request.user.pk:
        # An imported conversation is only replayed, never continued; so is one shared by someone else.
        return redirect("chat_player", pk=pk)
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
def conversation_share(request: HttpRequest, pk: int) -> HttpResponse:
    """The owner shares the conversation with the team (everyone may read it in the player), or stops."""
    conversation = get_object_or_404(Conversation, pk=pk, owner=request.user)
    conversation.shared = request.POST.get("shared") == "1"
    conversation.save(update_fields=["shared", "updated_at"])
    messages.success(request, "Shared with the team: everyone who signs in can read it." if conversation.shared
                     else "No longer shared: only you can see it.")
    return redirect("chat_view", pk=pk)


@require_POST
def conversation_delete(request: HttpRequest, pk: int) -> HttpResponse:
    get_object_or_404(Conversation, pk=pk, owner=request.user).delete()
    messages.success(request, "Conversation deleted.")
    return redirect("chat_list")


@require_http_methods(["GET", "POST"])
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


# --- replay: the player, runs and their diffs, import ------------------------------------------------

@require_GET
def player(request: HttpRequest, pk: int) -> HttpResponse:
    """The read-only replay player (static/js/replay-player.js reads /api/conversations/{id}/player/).

    Also where the team reads a conversation shared with it."""
    conversation = get_object_or_404(Conversation.objects.visible_to(request.user).select_related("owner"), pk=pk)
    return render(request, "chat/player.html", {
        "conversation": conversation,
        "page_data": {"conversationId": conversation.pk, "sandboxOrigin": settings.SANDBOX_ORIGIN,
                      "sandboxUrl": f"{settings.SANDBOX_ORIGIN}/sandbox/proxy/"},
    })


def _recorded_server_names(conversation: Conversation) -> list[str]:
    from chat.replay import recorded_calls

    names: list[str] = []
    for name in recorded_calls(conversation).values_list("server_name", flat=True):
        if name not in names:
            names.append(name)
    return names


@require_http_methods(["GET", "POST"])
def replays(request: HttpRequest, pk: int) -> HttpResponse:
    """A conversation's replay runs, and the forms that start one."""
    from chat import live, replay

    conversation = get_object_or_404(Conversation, pk=pk, owner=request.user)
    names = _recorded_server_names(conversation)
    servers = Server.objects.visible_to(request.user).filter(enabled=True).order_by("name")
    if request.method == "POST":
        ignore = [line.strip() for line in request.POST.get("ignore_paths", "").splitlines() if line.strip()]
        try:
            if request.POST.get("kind") == "live":
                ids = [int(i) for i in request.POST.getlist("server_ids") if i.isdigit()]
                run = live.start_live(conversation, request.user, model=request.POST.get("model", "").strip(),
                                      api_base=request.POST.get("api_base", "").strip(),
                                      api_key=request.POST.get("api_key", "").strip(), server_ids=ids, ignore_paths=ignore)
            else:
                mapping = {}
                for index, name in enumerate(names):
                    value = request.POST.get(f"server_{index}", "")
                    if value.isdigit():
                        mapping[name] = int(value)
                run = replay.start_run(conversation, request.user, ignore_paths=ignore, servers=mapping)
        except replay.ReplayError as exc:
            messages.error(request, str(exc))
            return redirect("chat_replays", pk=pk)
        return redirect("chat_replay_run", pk=run.pk)
    recorded = replay.recorded_calls(conversation)
    current = {}
    for call in recorded.select_related("server"):
        current.setdefault(call.server_name, call.server_id)
    try:
        default_map = replay.resolve_servers(request.user, names, current, {})
    except replay.ReplayError:
        default_map = {}
    mapping_rows = [{"index": i, "name": name, "selected": default_map.get(name)} for i, name in enumerate(names)]
    runs = conversation.replay_runs.select_related("created_by").order_by("-created_at")[:100]
    last_ignore = next((r.ignore_paths for r in runs if r.ignore_paths), [])
    return render(request, "chat/replays.html", {
        "conversation": conversation, "runs": runs, "servers": servers, "mapping_rows": mapping_rows,
        "call_count": recorded.count(), "user_message_count": len(live.user_messages(conversation)),
        "ignore_text": "\n".join(last_ignore),
        # Never a secret in the page: an API base with a password or token in it is left for the user to type.
        "live_api_base": conversation.api_base if conversation.api_base and url_secrets.mask(conversation.api_base) == conversation.api_base else "",
    })


@require_GET
def replay_run(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: the verdict, and per call the diff of the full result and of the projection."""
    from chat import replay
    from chat.models import ReplayRun

    run = get_object_or_404(ReplayRun.objects.select_related("conversation", "live_conversation", "created_by"),
                            pk=pk, conversation__owner=request.user)
    if replay.resume_if_stalled(run):
        run.refresh_from_db()
    items = list(run.items.order_by("position"))
    took = (run.finished_at - run.created_at).total_seconds() if run.finished_at else None
    return render(request, "chat/replay_run.html", {
        "run": run, "conversation": run.conversation, "items": items, "took": took,
        "page_data": {"runId": run.pk, "status": run.status},
    })


@require_POST
def conversation_import(request: HttpRequest) -> HttpResponse:
    """Import an export file as a read-only conversation and open it in the player."""
    from chat import archive

    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a conversation export file (.json) to import.")
        return redirect("chat_list")
    try:
        conversation = archive.import_conversation(upload.read(settings.REPLAY_IMPORT_MAX_BYTES + 1), request.user)
    except archive.ArchiveError as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return redirect("chat_list")
    messages.success(request, f"Imported “{conversation}” (read-only).")
    return redirect("chat_player", pk=conversation.pk)
