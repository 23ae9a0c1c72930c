/*
 * The session's own detector (keyer_session_params::detect), shared by the CPU test
 * (test_pipeline_session) and the CUDA test (test_pipeline_gpu):
 *  - detect_fn is called once per frame of every stream, in order, with the faces that a
 *    per-frame keyer_faces_detect() finds on the same decoded frames (same count, IoU >= 0.9);
 *  - what detect_fn adds to the overlay is drawn on the written frame (frame_fn sees it; the
 *    rest of the frame is the input), in passthrough and with keying;
 *  - the report lists the detect stage with every frame.
 * The clip is a pan over grace_hopper.jpg made with keyer_video_write_sample(): the face is in
 * view for the first frames and gone (the jacket) at the end.
 */
#ifndef KEYER_KT_DETECT_SESSION_H
#define KEYER_KT_DETECT_SESSION_H

/** Frames of each clip: the whole check's, and the most ds_check_session_detect() takes. */
#define DS_FRAMES 20

/* The whole check on @p device (KEYER_DEVICE_CPU or _CUDA): makes the two clips of @p frames
 * frames (8 to DS_FRAMES; the same pan and zoom over the photo, faster when shorter) in @p dir
 * (which also receives the output), runs the session twice (passthrough, then keying) and
 * compares each stream's detections with the per-frame detector at IoU >= @p min_iou; a face
 * in at least a quarter of each clip's frames, none in at least one, the drawn box seen in
 * at least half as many frames as a clip has. Fails the running cmocka test on any
 * difference. */
void ds_check_session_detect(const char *dir, int device, float min_iou, int frames);

#endif
