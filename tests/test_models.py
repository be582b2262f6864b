"""Every string a model holds can be written as UTF-8, wherever it came from."""

from computefence.models import AccelerateFacts, ProviderInfo, Target


def test_lone_surrogates_from_an_api_become_replacement_characters():
    # json.loads leaves an API's "\udcff" as a lone surrogate, which no UTF-8 writer accepts.
    info = ProviderInfo(provider="vast", pod_id="1", name="gpu\udcffbox", persistent_paths=["/mnt/\udcff"])
    assert info.name == "gpu?box" and info.persistent_paths == ["/mnt/?"]
    info.model_dump_json()


def test_nested_free_form_values_and_assignments_are_cleaned_too():
    facts = AccelerateFacts(config={"fsdp_config": {"name\udcff": ["x\udcff"]}})
    assert facts.config == {"fsdp_config": {"name?": ["x?"]}}
    target = Target(name="pod", host="h")
    target.name = "pod\udcff"
    assert target.name == "pod?"


def test_valid_non_ascii_text_is_untouched():
    assert Target(name="pod-é-😀", host="h").name == "pod-é-😀"
