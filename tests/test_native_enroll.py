def test_both_engines_enroll_with_base_models_only(tiny_gguf):
    talker, mmproj = tiny_gguf("tiny", "custom_voice", "f32")
    with pytest.raises(ValueError) as want:
        TTS(talker, mmproj, threads=2).enroll((LOUD, 24000))
    with pytest.raises(native.NativeError) as got, NativeTTS(talker, mmproj, threads=2) as nat:
        nat.enroll(LOUD, 24000)
    assert "voice cloning needs a Base model; this is a custom_voice model" in str(want.value)
    assert str(want.value) in str(got.value)
