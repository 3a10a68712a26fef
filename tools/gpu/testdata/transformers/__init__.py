"""A stand-in for transformers in torch_check_test (transformers cannot be
installed here): GPT2LMHeadModel.from_pretrained(DIR) reads DIR's
model.safetensors and config.json and computes GPT2LMHeadModel's forward with
safetensors_check.py's gpt2_forward, so torch_check.py's hf_gpt2 code path
(from_pretrained's arguments, .logits, named_parameters with the tied head
once) runs on the CPU. $STUB_HF_TRANSPOSE transposes every attn.c_proj weight
as it loads (a loader's mapping error, which the checks must catch)."""

import json
import os

import torch

__version__ = "stand-in"


class _Output:
    def __init__(self, logits):
        self.logits = logits


class GPT2LMHeadModel(torch.nn.Module):
    def __init__(self, state, config, forward):
        super().__init__()
        self._names = sorted(state)
        self._params = torch.nn.ParameterList(torch.nn.Parameter(state[k]) for k in self._names)
        self._config, self._forward = config, forward

    @classmethod
    def from_pretrained(cls, path, torch_dtype=None, attn_implementation=None):
        assert torch_dtype == torch.float32 and attn_implementation == "eager"
        st = __import__("safetensors_check")
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        state = st.read_safetensors(os.path.join(path, "model.safetensors"))
        if os.environ.get("STUB_HF_TRANSPOSE"):
            state = {k: v.t().contiguous() if k.endswith("attn.c_proj.weight") else v
                     for k, v in state.items()}
        return cls(state, config, st.gpt2_forward)

    def named_parameters(self, *args, **kwargs):
        return zip(self._names, self._params)

    def forward(self, input_ids):
        state = dict(zip(self._names, self._params))
        return _Output(self._forward(state, self._config, input_ids))
