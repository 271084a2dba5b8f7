"""Forms of the eval pages: a suite, a case (expectations as checked JSON), a run, side by side."""

from __future__ import annotations

import json

from django import forms

from evals import checks
from evals.models import Case, Suite
from tools.models import Server


class SuiteForm(forms.ModelForm):
    judge_api_key = forms.CharField(label="Judge API key", required=False, widget=forms.PasswordInput(render_value=False),
                                    help_text="Optional; stored encrypted and never shown again. Left empty, the stored key is kept.")

    class Meta:
        model = Suite
        fields = ["name", "description", "shared", "servers", "system_prompt", "judge_model", "judge_api_base", "judge_api_key"]
        widgets = {"servers": forms.CheckboxSelectMultiple, "description": forms.Textarea(attrs={"rows": 2}),
                   "system_prompt": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["servers"].queryset = Server.objects.visible_to(user).filter(enabled=True).order_by("name")

    def clean_judge_api_key(self):
        value = self.cleaned_data.get("judge_api_key") or ""
        return value or (self.instance.judge_api_key if self.instance.pk else "")


class CaseForm(forms.ModelForm):
    prompts_text = forms.CharField(label="Prompts", widget=forms.Textarea(attrs={"rows": 4}),
                                   help_text="The user's turns; separate turns with a line holding only ---.")
    tools_text = forms.CharField(label="Tools offered", required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                 help_text="One tool a line (tool, or server/tool); empty: every tool of the suite's servers.")
    expectations_text = forms.CharField(label="Expectations (JSON)", required=False,
                                        widget=forms.Textarea(attrs={"rows": 14, "class": "mono", "spellcheck": "false"}))

    class Meta:
        model = Case
        fields = ["name", "threshold"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["prompts_text"] = "\n---\n".join(self.instance.prompts)
            self.initial["tools_text"] = "\n".join(self.instance.tools)
            self.initial["expectations_text"] = json.dumps(self.instance.expectations, indent=2, ensure_ascii=False)

    def clean_threshold(self):
        value = self.cleaned_data["threshold"]
        if not 0 <= value <= 1:
            raise forms.ValidationError("A pass rate between 0 and 1.")
        return value

    def clean_prompts_text(self):
        turns = [t.strip() for t in self.cleaned_data["prompts_text"].replace("\r\n", "\n").split("\n---\n")]
        turns = [t for t in turns if t]
        if not turns:
            raise forms.ValidationError("At least one prompt.")
        return turns

    def clean_tools_text(self):
        names = [line.strip() for line in (self.cleaned_data.get("tools_text") or "").splitlines() if line.strip()]
        if any(len(n) > 400 for n in names) or len(names) > 500:
            raise forms.ValidationError("At most 500 tool names of at most 400 characters.")
        return list(dict.fromkeys(names))

    def clean_expectations_text(self):
        text = self.cleaned_data.get("expectations_text") or "{}"
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        try:
            checks.parse(data)
        except checks.ExpectationError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def save(self, commit=True):
        self.instance.prompts = self.cleaned_data["prompts_text"]
        self.instance.expectations = self.cleaned_data["expectations_text"]
        self.instance.tools = self.cleaned_data["tools_text"]
        return super().save(commit)


class RunForm(forms.Form):
    models = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="One litellm model a line, optionally followed by its API base: "
                                       "openai/gpt-4o-mini  or  openai/llama3 http://127.0.0.1:11434/v1")
    api_key = forms.CharField(label="API key", required=False, widget=forms.PasswordInput(render_value=False),
                              help_text="Optional, for every model; else your provider keys.")
    repeat = forms.IntegerField(min_value=1, initial=1, help_text="Attempts per case and model.")
    concurrency = forms.IntegerField(min_value=1, required=False, help_text="Attempts at once per provider (default: the deployment's).")

    def clean_models(self):
        out = []
        for line in self.cleaned_data["models"].splitlines():
            parts = line.split()
            if parts:
                out.append({"model": parts[0], "api_base": parts[1] if len(parts) > 1 else ""})
        return out


class SideBySideForm(forms.Form):
    prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    models = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="Up to three: one litellm model a line, optionally followed by its API base.")
    api_key = forms.CharField(label="API key", required=False, widget=forms.PasswordInput(render_value=False))
    servers = forms.ModelMultipleChoiceField(queryset=Server.objects.none(), required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["servers"].queryset = Server.objects.visible_to(user).filter(enabled=True).order_by("name")

    def clean_models(self):
        out = RunForm.clean_models(self)
        if not 1 <= len(out) <= 3:
            raise forms.ValidationError("One to three models.")
        return out
